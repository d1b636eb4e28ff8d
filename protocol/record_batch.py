"""One v2 batch as a view over bytes (`RecordBatch`: its header parsed with one struct call),
walks over buffers of batches, Kafka's Produce checks, and header patches (see protocol.records)."""

from __future__ import annotations

import struct
from typing import Iterator

import crc32c

from protocol import compression as _codecs
from protocol.batch_format import (
    ATTRIBUTES_OFFSET, COMPRESSION_MASK, CONTROL_MASK, CRC_START, CURRENT_MAGIC, DELETE_HORIZON_MASK, HEADER,
    HEADER_SIZE, LEADER_EPOCH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, MAX_TIMESTAMP_OFFSET, MIN_BATCH_LENGTH,
    NO_SEQUENCE, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, Compression, ControlRecord,
    CorruptRecordError, InvalidRecordError, Record, TimestampType, UnsupportedCompressionError, check_magic,
)
from protocol.record_decoding import decode_records, parse_control_record

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")


class RecordBatch:
    """The header of one v2 batch at `pos` in `buf`, parsed eagerly (one struct call)."""

    __slots__ = (
        "buf", "pos", "base_offset", "batch_length", "partition_leader_epoch", "magic",
        "crc", "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
        "producer_id", "producer_epoch", "base_sequence", "record_count", "size",
    )

    def __init__(self, buf, pos: int = 0):
        if len(buf) - pos < HEADER_SIZE:
            if len(buf) - pos >= MAGIC_OFFSET + 1:
                check_magic(buf[pos + MAGIC_OFFSET])
            raise CorruptRecordError(f"record batch header truncated at position {pos}")
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
         self.crc, self.attributes, self.last_offset_delta, self.base_timestamp,
         self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
         self.record_count) = HEADER.unpack_from(buf, pos)
        check_magic(self.magic)
        self.buf = buf
        self.pos = pos
        # Bytes the batch occupies, including offset and length fields (an attribute, not a
        # property: it is read several times per batch on the produce path).
        self.size = self.batch_length + LOG_OVERHEAD

    # -- derived header facts -------------------------------------------------
    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    def view(self) -> memoryview:
        """The whole batch, zero copy."""
        return memoryview(self.buf)[self.pos:self.pos + self.size]

    def body(self) -> memoryview:
        """The records section (possibly compressed), zero copy."""
        return memoryview(self.buf)[self.pos + HEADER_SIZE:self.pos + self.size]

    # -- integrity --------------------------------------------------------------
    def compute_crc(self) -> int:
        return crc32c.crc32c(memoryview(self.buf)[self.pos + CRC_START:self.pos + self.size])

    def is_valid(self) -> bool:
        return (self.batch_length >= MIN_BATCH_LENGTH
                and len(self.buf) - self.pos >= self.size
                and self.compute_crc() == self.crc)

    def ensure_valid(self) -> None:
        """Kafka's DefaultRecordBatch.ensureValid: size, then CRC."""
        if self.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch size {self.size} is less than the minimum {HEADER_SIZE}")
        if len(self.buf) - self.pos < self.size:
            raise CorruptRecordError(f"record batch at position {self.pos} is truncated")
        crc = self.compute_crc()
        if crc != self.crc:
            raise CorruptRecordError(
                f"record batch is corrupt (stored crc = {self.crc}, computed crc = {crc})")

    # -- records ------------------------------------------------------------------
    def records(self) -> Iterator[Record]:
        """Decode records lazily; a compressed batch is decompressed as a stream, so one that
        inflates to gigabytes is read with about a chunk and a record in memory."""
        if self.record_count < 0:
            raise InvalidRecordError(f"record batch has negative record count {self.record_count}")
        if self.compression == Compression.NONE:
            return decode_records(self.body(), self.record_count, self.base_offset, self.base_timestamp,
                                 self.timestamp_type, self.max_timestamp)
        if self.compression > Compression.ZSTD:
            raise UnsupportedCompressionError(f"unknown compression codec {self.compression}")
        return self._stream_records()

    def _stream_records(self) -> Iterator[Record]:
        from protocol.recordscan import ScanError, scan

        count, index = self.record_count, 0
        pending = bytearray()
        try:
            for piece in _codecs.decompress_stream(self.compression, self.body()):
                pending += piece
                whole, seen, _, _ = scan(pending, 0, index, count, 0, 0, 0, 0)
                if seen > index:
                    yield from decode_records(memoryview(pending)[:whole], seen - index,
                                             self.base_offset, self.base_timestamp,
                                             self.timestamp_type, self.max_timestamp, check_end=False)
                    index, pending = seen, pending[whole:]
        except _codecs.CompressionError as exc:
            raise CorruptRecordError(str(exc)) from exc
        except ScanError as exc:
            raise CorruptRecordError(str(exc)) from exc
        if index < count:
            raise CorruptRecordError("record batch holds fewer records than its count")
        if pending:
            raise CorruptRecordError("record batch holds bytes past its last record")

    def control_record(self) -> ControlRecord:
        """The commit/abort marker of a control batch."""
        if not self.is_control:
            raise InvalidRecordError("not a control batch")
        for record in self.records():
            return parse_control_record(record)
        raise InvalidRecordError("control batch holds no record")

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.record_count}, size={self.size}, attributes={self.attributes:#x}, "
                f"producer_id={self.producer_id}, epoch={self.producer_epoch}, "
                f"base_sequence={self.base_sequence})")


def iter_batches(buf, start: int = 0, end: int | None = None, *,
                 allow_partial: bool = False) -> Iterator[RecordBatch]:
    """Walk the batches in buf[start:end] by their length fields.

    A length below the v2 minimum raises CorruptRecordError.  A trailing batch cut
    short ends the walk when `allow_partial` (fetch responses are cut that way) and
    raises CorruptRecordError otherwise.  CRCs are not checked here.
    """
    end = len(buf) if end is None else end
    pos = start
    while pos < end:
        remaining = end - pos
        if remaining < LOG_OVERHEAD:
            if allow_partial:
                return
            raise CorruptRecordError(f"{remaining} trailing bytes are not a record batch")
        (batch_length,) = _I32.unpack_from(buf, pos + 8)
        if batch_length < MIN_BATCH_LENGTH:
            if remaining > MAGIC_OFFSET:
                check_magic(buf[pos + MAGIC_OFFSET])
            raise CorruptRecordError(
                f"record batch size {batch_length + LOG_OVERHEAD} is less than the minimum {HEADER_SIZE}")
        if remaining < batch_length + LOG_OVERHEAD:
            if remaining > MAGIC_OFFSET:
                check_magic(buf[pos + MAGIC_OFFSET])
            if allow_partial:
                return
            raise CorruptRecordError(f"record batch at position {pos} is truncated")
        batch = RecordBatch(buf, pos)
        yield batch
        pos += batch.size


def validate_produce_records(buf, api_version: int) -> RecordBatch:
    """Kafka's ProduceRequest.validateRecords: exactly one v2 batch per partition.

    Returns the batch.  Raises InvalidRecordError (INVALID_RECORD) or
    UnsupportedCompressionError (zstd before Produce v7).
    """
    # In the order of Kafka's batch iterator: fewer bytes than a length means "no batch"; a tiny
    # length is corrupt; fewer bytes than the magic is "no batch"; a magic no format has is corrupt
    # (negative ones too: read unsigned here); only then a batch cut short is "no batch".
    if buf is None or len(buf) < LOG_OVERHEAD:
        raise _no_batch(api_version)
    (batch_length,) = _I32.unpack_from(buf, 8)
    if batch_length < 14:
        raise CorruptRecordError(f"record size {batch_length} is less than the minimum record overhead (14)")
    if len(buf) < LOG_OVERHEAD + 5:
        raise _no_batch(api_version)
    if buf[MAGIC_OFFSET] > CURRENT_MAGIC:
        magic = buf[MAGIC_OFFSET] - 256 if buf[MAGIC_OFFSET] > 127 else buf[MAGIC_OFFSET]
        raise CorruptRecordError(f"record batch magic {magic} is none Kafka knows")
    if batch_length + LOG_OVERHEAD > len(buf):
        raise _no_batch(api_version)
    if buf[MAGIC_OFFSET] != CURRENT_MAGIC:
        raise _old_magic(api_version)
    first = RecordBatch(buf, 0)
    if api_version < 7 and first.compression == Compression.ZSTD:
        raise UnsupportedCompressionError(
            f"Produce requests with version {api_version} are not allowed to use ZStandard compression")
    if first.size != len(buf):
        raise InvalidRecordError(
            f"Produce requests with version {api_version} are only allowed to contain exactly one record batch per partition")
    return first


def _no_batch(api_version: int) -> InvalidRecordError:
    return InvalidRecordError(
        f"Produce requests with version {api_version} must have at least one record batch per partition")


def _old_magic(api_version: int) -> InvalidRecordError:
    return InvalidRecordError(
        f"Produce requests with version {api_version} are only allowed to contain record batches with magic version 2")


# -- in-place patches (outside the CRC) -----------------------------------------

def set_base_offset(buf, pos: int, base_offset: int) -> None:
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf, pos: int, epoch: int) -> None:
    _I32.pack_into(buf, pos + LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf, pos: int, timestamp: int) -> None:
    """Stamp LogAppendTime in place: attributes and max timestamp change, so the CRC too."""
    (attributes,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    (batch_length,) = _I32.unpack_from(buf, pos + 8)
    crc = crc32c.crc32c(memoryview(buf)[pos + CRC_START:pos + LOG_OVERHEAD + batch_length])
    _U32.pack_into(buf, pos + 17, crc)


def patched_header(batch: RecordBatch, *, base_offset: int | None = None,
                   partition_leader_epoch: int | None = None,
                   log_append_time: int | None = None) -> bytearray:
    """A copy of the batch's 61-byte header with fields replaced, CRC kept valid.

    Lets the log write `header + batch.body()` with writev() without copying or
    mutating the (possibly read-only) request buffer. A `batch.max_timestamp` changed since
    parsing (validation found the records' real one) is written too.
    """
    header = bytearray(memoryview(batch.buf)[batch.pos:batch.pos + HEADER_SIZE])
    if base_offset is not None:
        _I64.pack_into(header, 0, base_offset)
    if partition_leader_epoch is not None:
        _I32.pack_into(header, LEADER_EPOCH_OFFSET, partition_leader_epoch)
    if log_append_time is not None:
        _I16.pack_into(header, ATTRIBUTES_OFFSET, batch.attributes | TIMESTAMP_TYPE_MASK)
        max_timestamp = log_append_time
    elif _I64.unpack_from(header, MAX_TIMESTAMP_OFFSET)[0] != batch.max_timestamp:
        max_timestamp = batch.max_timestamp
    else:
        max_timestamp = None
    if max_timestamp is not None:
        _I64.pack_into(header, MAX_TIMESTAMP_OFFSET, max_timestamp)
        crc = crc32c.crc32c(memoryview(header)[CRC_START:])
        crc = crc32c.crc32c(batch.body(), crc)
        _U32.pack_into(header, 17, crc)
    return header
