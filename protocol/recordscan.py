"""Walk the records of a v2 batch without decoding them into objects: Kafka's record checks.

    scan(buf, pos, index, count, base_timestamp, low, high, flags)
        -> (pos, index, record_errors, max_timestamp)

Starting at `pos` with `index` records already seen, walks records while whole ones are in
`buf` and fewer than `count` have been seen; returns where it stopped, the records seen so far,
the largest record timestamp it walked (-1 if none was larger: Kafka's NO_TIMESTAMP) and the
per-record problems it found, as (batch index, kind, timestamp, offset delta) tuples
(kind NO_KEY or BAD_TIMESTAMP; a record has at most one, the key is checked first, as Kafka's
LogValidator does). A record that does not parse to exactly its declared length raises
`ScanError`. Stopping short of `count` means the next record is not whole in `buf`: more bytes
(the next decompressed chunk) or, if there are none, a premature end of the batch.

`flags`: CHECK_KEYS (compacted topics), CHECK_TIMESTAMPS (outside [low, high] is refused; -1, no timestamp, never is),
CHECK_OFFSETS (inner offset deltas must be 0..n-1: Kafka checks this for compressed batches).

The C version in `_recordscan.c` does the same at memory speed; this module's Python version is
the fallback when it is not built, and the reference the tests hold it to.
"""

from __future__ import annotations

from protocol.compression import decompress_stream

NO_KEY = 1
BAD_TIMESTAMP = 2

CHECK_KEYS = 1
CHECK_TIMESTAMPS = 2
CHECK_OFFSETS = 4


try:
    from protocol import _recordscan  # type: ignore[attr-defined]
except ImportError:  # not built: the same walk in Python (scan_python below)
    _recordscan = None
if _recordscan is not None and getattr(_recordscan, "ABI", 1) < 2:
    _recordscan = None   # a stale build (no max timestamp): `setup.py build_ext --inplace` again

if _recordscan is not None:
    ScanError = _recordscan.ScanError
else:
    class ScanError(ValueError):
        """A record that does not parse (Kafka's InvalidRecordException)."""


def _varint(buf, pos: int, end: int, max_bytes: int):
    """(value, next pos), or (None, pos) when the varint runs past `end`."""
    result = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            return None, pos
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if max_bytes == 5:
                result &= 0xFFFFFFFF  # an int32, as Java reads it
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise ScanError(f"varint is longer than {max_bytes} bytes")


def _field(buf, pos: int, limit: int, max_bytes: int = 5) -> int:
    value, pos2 = _varint(buf, pos, limit, max_bytes)
    if value is None:
        raise ScanError("record runs past its declared size")
    return value, pos2


def _skip_bytes(buf, pos: int, limit: int, what: str):
    """(length or -1 for null, position after the bytes)."""
    length, pos = _field(buf, pos, limit)
    if length < -1:
        raise ScanError(f"invalid negative {what} size {length}")
    if length > 0:
        pos += length
        if pos > limit:
            raise ScanError(f"{what} runs past the record's declared size")
    return length, pos


def scan_python(buf, pos: int, index: int, count: int, base_timestamp: int, low: int, high: int,
                flags: int):
    end = len(buf)
    errors = []
    check_keys = flags & CHECK_KEYS
    check_ts = flags & CHECK_TIMESTAMPS
    check_offsets = flags & CHECK_OFFSETS
    max_timestamp = -1
    while index < count:
        length, body = _varint(buf, pos, end, 5)
        if length is None:
            break
        if length < 0:
            raise ScanError(f"invalid record size {length}")
        limit = body + length
        if limit > end:
            break
        if length < 1:
            raise ScanError("empty record")
        p = body + 1  # attributes: unused in v2
        ts_delta, p = _field(buf, p, limit, 10)
        offset_delta, p = _field(buf, p, limit)
        key_length, p = _skip_bytes(buf, p, limit, "key")
        _, p = _skip_bytes(buf, p, limit, "value")
        headers, p = _field(buf, p, limit)
        if headers < 0:
            raise ScanError(f"invalid negative header count {headers}")
        for _ in range(headers):
            header_key, p = _skip_bytes(buf, p, limit, "header key")
            if header_key < 0:
                raise ScanError("invalid negative header key size")
            _, p = _skip_bytes(buf, p, limit, "header value")
        if p != limit:
            raise ScanError(f"invalid record size: expected to read {length} bytes in record "
                            f"payload, but instead read {p - body}")
        record_timestamp = _as_int64(base_timestamp + ts_delta)   # Java's long, as the C walk
        if record_timestamp > max_timestamp:
            max_timestamp = record_timestamp
        if check_offsets and offset_delta != index:
            raise ScanError(f"inner record offset delta {offset_delta} of record {index} "
                            f"is not {index}")
        if check_keys and key_length < 0:
            errors.append((index, NO_KEY, 0, offset_delta))
        elif check_ts:
            timestamp = base_timestamp + ts_delta
            if timestamp != -1 and (timestamp < low or timestamp > high):
                errors.append((index, BAD_TIMESTAMP, timestamp, offset_delta))
        pos = limit
        index += 1
    return pos, index, errors, max_timestamp


def _as_int64(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


ACCELERATED = _recordscan is not None
scan = _recordscan.scan if ACCELERATED else scan_python


# -- a whole batch --------------------------------------------------------------------------

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def walk_batch(batch, flags: int, low: int = INT64_MIN, high: int = INT64_MAX) -> tuple[list, int]:
    """Check every record of `batch` (a protocol.records.RecordBatch): (the per-record errors, the
    largest record timestamp, -1 when none is larger), which Kafka stores as the batch's max
    timestamp whatever the producer wrote there.

    Uncompressed records are read in place; compressed ones are decompressed as a stream, so no
    more than about a chunk plus one record is held at once. Raises ScanError for records that
    do not match the batch (count, truncation, trailing bytes, malformed records) and
    compression.CompressionError for a payload that does not decompress.
    """
    count = batch.record_count
    if low < INT64_MIN:
        low = INT64_MIN
    if high > INT64_MAX:
        high = INT64_MAX
    compression = batch.attributes & 0x07   # (the codec bits, without a property call)
    if compression == 0:
        body = batch.body()
        pos, index, errors, max_timestamp = scan(body, 0, 0, count, batch.base_timestamp, low, high,
                                                 flags)
        _check_end(index, count, len(body) - pos)
        return errors, max_timestamp
    errors: list = []
    max_timestamp = -1
    index = 0
    pending = bytearray()
    for piece in decompress_stream(compression, batch.body()):
        if pending:
            pending += piece
            buf = pending
        else:
            buf = piece
        pos, index, found, largest = scan(buf, 0, index, count, batch.base_timestamp, low, high,
                                          flags)
        errors += found
        if largest > max_timestamp:
            max_timestamp = largest
        if buf is pending:
            del pending[:pos]
        else:
            pending = bytearray(memoryview(piece)[pos:])
        if index == count and pending:
            break
    _check_end(index, count, len(pending))
    return errors, max_timestamp


def _check_end(index: int, count: int, remaining: int) -> None:
    if index < count:
        raise ScanError("Incorrect declared batch size, premature EOF reached")
    if remaining:
        raise ScanError("Incorrect declared batch size, records still remaining in file")
