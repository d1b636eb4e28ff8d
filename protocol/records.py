"""Kafka RecordBatch v2 (magic 2) as a view over bytes.

Hot paths (Produce, Fetch, the log) use only the 61-byte header:

    batch = RecordBatch(buf, pos)          # parses the header with one struct call
    batch.base_offset, batch.last_offset, batch.record_count, batch.size, ...
    batch.ensure_valid()                   # CRC32C over attributes..end
    for batch in iter_batches(buf): ...    # length-checked walk over a buffer
    set_base_offset(buf, pos, offset)      # in-place patches (writable buffers);
    set_partition_leader_epoch(buf, pos, epoch)   # both fields lie outside the CRC
    patched_header(batch, base_offset=..., partition_leader_epoch=..., log_append_time=...)
                                           # a fresh 61-byte header, for writev()
    validate_produce_records(buf, api_version)    # Kafka's ProduceRequest checks

Features that need the records (compaction, timestamps lookup, control markers)
iterate them lazily, decompressing as needed:

    for record in batch.records(): record.offset, .timestamp, .key, .value, .headers
    batch.control_record()  -> ControlRecord(type, coordinator_epoch) for control batches

Building batches (tests, transaction markers, compaction, internal topics):

    build_batch([Record-like or SimpleRecord...], base_offset=0, compression=NONE, ...)
    build_control_batch(ControlType.COMMIT, producer_id, producer_epoch, coordinator_epoch, ...)

Every problem with the bytes raises `RecordBatchError` (subclasses
`CorruptRecordError`, `InvalidRecordError`, `UnsupportedCompressionError`), whose
`error_code` is the Kafka error code Kafka answers with.  Magic 0 and 1 batches
are refused with INVALID_RECORD, as Kafka 4 does ("... only allowed to contain
record batches with magic version 2").
"""

from __future__ import annotations

import enum
import struct
from typing import Iterator, NamedTuple, Sequence

import crc32c

from protocol import compression as _codecs

from protocol.errors import ErrorCode as _ErrorCode

# Header layout: baseOffset q, batchLength i, partitionLeaderEpoch i, magic b, crc I,
# attributes h, lastOffsetDelta i, baseTimestamp q, maxTimestamp q, producerId q,
# producerEpoch h, baseSequence i, recordCount i.
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
CRC_START = 21  # the CRC covers attributes .. end of batch
MAGIC_OFFSET = 16
LEADER_EPOCH_OFFSET = 12
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
CURRENT_MAGIC = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


class Compression(enum.IntEnum):
    NONE = _codecs.NONE
    GZIP = _codecs.GZIP
    SNAPPY = _codecs.SNAPPY
    LZ4 = _codecs.LZ4
    ZSTD = _codecs.ZSTD


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class RecordBatchError(Exception):
    """Bad record bytes; `error_code` is the Kafka error code to answer with."""

    error_code = _ErrorCode.CORRUPT_MESSAGE

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class CorruptRecordError(RecordBatchError):
    error_code = _ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(RecordBatchError):
    error_code = _ErrorCode.INVALID_RECORD


class UnsupportedCompressionError(RecordBatchError):
    error_code = _ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class Header(NamedTuple):
    key: str
    value: bytes | None


class Record(NamedTuple):
    """One decoded record; `offset` and `timestamp` are absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()
    attributes: int = 0


class SimpleRecord(NamedTuple):
    """Input to build_batch; offset_delta None means 'next one'."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence = ()
    timestamp: int = NO_TIMESTAMP
    offset_delta: int | None = None


class ControlRecord(NamedTuple):
    type: ControlType
    coordinator_epoch: int
    version: int = 0


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
                _check_magic(buf[pos + MAGIC_OFFSET])
            raise CorruptRecordError(f"record batch header truncated at position {pos}")
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
         self.crc, self.attributes, self.last_offset_delta, self.base_timestamp,
         self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
         self.record_count) = HEADER.unpack_from(buf, pos)
        _check_magic(self.magic)
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
            return _iter_records(self.body(), self.record_count, self.base_offset, self.base_timestamp,
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
                    yield from _iter_records(memoryview(pending)[:whole], seen - index,
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


def _check_magic(magic: int) -> None:
    if magic != CURRENT_MAGIC:
        raise InvalidRecordError(
            f"record batches with magic {magic} are not supported; "
            f"only record batches with magic version 2 are allowed")


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
                _check_magic(buf[pos + MAGIC_OFFSET])
            raise CorruptRecordError(
                f"record batch size {batch_length + LOG_OVERHEAD} is less than the minimum {HEADER_SIZE}")
        if remaining < batch_length + LOG_OVERHEAD:
            if remaining > MAGIC_OFFSET:
                _check_magic(buf[pos + MAGIC_OFFSET])
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
    # As Kafka's batch iterator: fewer bytes than a header up to the magic, or a first
    # batch cut short, means "no batch"; a tiny length is corrupt; then the magic.
    if buf is None or len(buf) < LOG_OVERHEAD + 5:
        raise _no_batch(api_version)
    (batch_length,) = _I32.unpack_from(buf, 8)
    if batch_length + LOG_OVERHEAD > len(buf):
        raise _no_batch(api_version)
    if batch_length < 14:
        raise CorruptRecordError(f"record size {batch_length} is less than the minimum record overhead (14)")
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


# -- varints and record decoding -----------------------------------------------

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


def _iter_records(body: memoryview, count: int, base_offset: int, base_timestamp: int,
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
    version, type_id = _CONTROL_KEY.unpack_from(record.key)
    if type_id not in (ControlType.ABORT, ControlType.COMMIT):
        raise InvalidRecordError(f"unknown control record type {type_id}")
    coordinator_epoch = -1
    if record.value is not None and len(record.value) >= 6:
        _, coordinator_epoch = _CONTROL_VALUE.unpack_from(record.value)
    return ControlRecord(ControlType(type_id), coordinator_epoch, version)


# -- building batches ---------------------------------------------------------------

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
        key=_CONTROL_KEY.pack(0, int(control_type)),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch([record], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, transactional=True, control=True,
                       partition_leader_epoch=partition_leader_epoch)
