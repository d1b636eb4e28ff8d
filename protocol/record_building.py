"""Encoding v2 batches: records, whole batches and transaction markers (tests, the
transaction coordinator, compaction, internal topics)."""

from __future__ import annotations

import struct
from typing import Sequence

import crc32c

from protocol import compression as _codecs
from protocol.batch_format import (
    COMPRESSION_MASK, CONTROL_KEY, CONTROL_MASK, CONTROL_VALUE, CRC_START, CURRENT_MAGIC, DELETE_HORIZON_MASK,
    HEADER, HEADER_SIZE, LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
    NO_SEQUENCE, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, Compression, ControlType,
    SimpleRecord, TimestampType,
)

_U32 = struct.Struct(">I")


def _varint(value: int, out: bytearray) -> None:
    v = (value << 1) ^ (value >> 63)  # zig-zag, valid for int32 and int64
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _put_bytes(value, out: bytearray) -> None:
    if value is None:
        _varint(-1, out)
    else:
        _varint(len(value), out)
        out += value


def encode_record(offset_delta: int, timestamp_delta: int, key, value, headers=(),
                  attributes: int = 0) -> bytes:
    body = bytearray()
    body.append(attributes & 0xFF)
    _varint(timestamp_delta, body)
    _varint(offset_delta, body)
    _put_bytes(key, body)
    _put_bytes(value, body)
    _varint(len(headers), body)
    for hkey, hvalue in headers:
        _put_bytes(hkey.encode("utf-8") if isinstance(hkey, str) else hkey, body)
        _put_bytes(hvalue, body)
    out = bytearray()
    _varint(len(body), out)
    out += body
    return bytes(out)


def build_batch(records: Sequence, *, base_offset: int = 0, compression_type: int = Compression.NONE,
                timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, transactional: bool = False,
                control: bool = False, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                base_timestamp: int | None = None, max_timestamp: int | None = None,
                delete_horizon_ms: int | None = None, last_offset_delta: int | None = None) -> bytes:
    """Encode a v2 batch.  `records` hold SimpleRecord or Record items (or anything
    with value/key/headers/timestamp and an optional offset_delta or offset).

    Offset deltas default to 0..n-1; a Record's absolute offset is kept relative to
    `base_offset` (compaction keeps offsets).  With `delete_horizon_ms`, the base
    timestamp field is the delete horizon and the flag is set, as Kafka's cleaner does.
    `last_offset_delta` overrides the computed one (the cleaner keeps a batch's offset
    range, and may keep an empty batch to preserve a producer's last sequence).
    """
    if not records and last_offset_delta is None:
        raise ValueError("a record batch needs at least one record")
    deltas, stamps = [], []
    for i, rec in enumerate(records):
        delta = getattr(rec, "offset_delta", None)
        if delta is None:
            offset = getattr(rec, "offset", None)
            delta = i if offset is None else offset - base_offset
        deltas.append(delta)
        stamps.append(rec.timestamp)
    if base_timestamp is None:
        known = [t for t in stamps if t is not None and t >= 0]
        base_timestamp = min(known) if known else NO_TIMESTAMP
    if max_timestamp is None:
        known = [t for t in stamps if t is not None and t >= 0]
        max_timestamp = max(known) if known else NO_TIMESTAMP
    attributes = compression_type & COMPRESSION_MASK
    if delete_horizon_ms is not None:
        # As Kafka's builder does: the base timestamp field holds the horizon and
        # record timestamp deltas are taken against it.
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms
    ts_base = base_timestamp
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    body = bytearray()
    for rec, delta, ts in zip(records, deltas, stamps):
        ts_delta = 0 if ts is None or ts < 0 or ts_base < 0 else ts - ts_base
        body += encode_record(delta, ts_delta, rec.key, rec.value, rec.headers,
                              getattr(rec, "attributes", 0))
    if compression_type != Compression.NONE:
        body = _codecs.compress(compression_type, body)
    if last_offset_delta is None:
        last_offset_delta = deltas[-1]
    header = bytearray(HEADER.pack(
        base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), partition_leader_epoch,
        CURRENT_MAGIC, 0, attributes, last_offset_delta, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, len(records)))
    crc = crc32c.crc32c(memoryview(header)[CRC_START:])
    crc = crc32c.crc32c(body, crc)
    _U32.pack_into(header, 17, crc)
    return bytes(header + body)


def build_control_batch(control_type: ControlType, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int, *, base_offset: int = 0, timestamp: int = NO_TIMESTAMP,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A transaction marker (commit or abort) batch, as the transaction coordinator writes."""
    record = SimpleRecord(
        key=CONTROL_KEY.pack(0, int(control_type)),
        value=CONTROL_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch([record], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, transactional=True, control=True,
                       partition_leader_epoch=partition_leader_epoch)
