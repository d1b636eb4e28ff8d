"""Walking the records of a v2 batch's (uncompressed) body: varints, records, control records."""

from __future__ import annotations

from typing import Iterator

from protocol.batch_format import (
    CONTROL_KEY, CONTROL_VALUE, ControlRecord, ControlType, CorruptRecordError, Header, InvalidRecordError,
    Record, TimestampType,
)


def _read_varint(buf, pos: int, limit: int, max_bytes: int) -> tuple[int, int]:
    """Zig-zag varint at pos; bounded to max_bytes (5 for int32, 10 for int64)."""
    result = shift = 0
    for i in range(max_bytes):
        if pos >= limit:
            raise CorruptRecordError("varint runs past the end of the record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def _read_bytes(buf, pos: int, limit: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos, limit, 5)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"invalid length {length}")
        return None, pos
    if pos + length > limit:
        raise CorruptRecordError("field runs past the end of the record")
    return bytes(buf[pos:pos + length]), pos + length


def decode_records(body: memoryview, count: int, base_offset: int, base_timestamp: int,
                  timestamp_type: TimestampType, max_timestamp: int,
                  check_end: bool = True) -> Iterator[Record]:
    pos, end = 0, len(body)
    log_append = timestamp_type == TimestampType.LOG_APPEND_TIME
    for _ in range(count):
        length, pos = _read_varint(body, pos, end, 5)
        if length < 0 or pos + length > end:
            raise CorruptRecordError("record length runs past the end of the batch")
        limit = pos + length
        if pos >= limit:
            raise CorruptRecordError("empty record")
        attributes = body[pos]
        pos += 1
        ts_delta, pos = _read_varint(body, pos, limit, 10)
        offset_delta, pos = _read_varint(body, pos, limit, 5)
        key, pos = _read_bytes(body, pos, limit)
        value, pos = _read_bytes(body, pos, limit)
        n_headers, pos = _read_varint(body, pos, limit, 5)
        if n_headers < 0:
            raise CorruptRecordError(f"invalid header count {n_headers}")
        headers = []
        for _h in range(n_headers):
            hkey, pos = _read_bytes(body, pos, limit)
            if hkey is None:
                raise CorruptRecordError("null header key")
            hvalue, pos = _read_bytes(body, pos, limit)
            try:
                headers.append(Header(hkey.decode("utf-8"), hvalue))
            except UnicodeDecodeError as exc:
                raise CorruptRecordError("header key is not UTF-8") from exc
        if pos != limit:
            raise CorruptRecordError("record length does not match its fields")
        timestamp = max_timestamp if log_append else base_timestamp + ts_delta
        yield Record(base_offset + offset_delta, timestamp, key, value, tuple(headers), attributes)
    if check_end and pos != end:
        raise CorruptRecordError("record batch holds bytes past its last record")


def parse_control_record(record: Record) -> ControlRecord:
    if record.key is None or len(record.key) < 4:
        raise InvalidRecordError("control record key is too short")
    version, type_id = CONTROL_KEY.unpack_from(record.key)
    if type_id not in (ControlType.ABORT, ControlType.COMMIT):
        raise InvalidRecordError(f"unknown control record type {type_id}")
    coordinator_epoch = -1
    if record.value is not None and len(record.value) >= 6:
        _, coordinator_epoch = CONTROL_VALUE.unpack_from(record.value)
    return ControlRecord(ControlType(type_id), coordinator_epoch, version)
