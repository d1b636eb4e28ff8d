"""Message sets of the magic 0 and 1 formats (before KIP-98's record batches), both ways.

Kafka 3.9 still serves clients that speak them: Produce v0-v2 may carry a message set, which the
broker converts to one v2 batch before appending (`to_batch`), and Fetch v0-v3 answers in the format
of the request's version (v0-v1: magic 0, v2-v3: magic 1), converted from the stored batches
(`from_batches`). The users today are old but packaged clients: sarama before 0.11 settings and
kafka-go 0.2 (Debian's).

Layout: a message set is a run of `offset int64, size int32, message`, a message
`crc uint32, magic int8, attributes int8, [timestamp int64 if magic 1], key bytes, value bytes`
(bytes: int32 length, -1 for null), the CRC (zlib's CRC-32) covering magic to the end. A compressed
message set is one wrapper message whose value is the compressed inner set: inner offsets are
absolute in magic 0 and relative (0..n-1, the wrapper carrying the last absolute one) in magic 1.
"""

from __future__ import annotations

import struct
import zlib

from protocol import compression
from protocol.records import (Compression, CorruptRecordError, InvalidRecordError, SimpleRecord,
                              TimestampType, UnsupportedCompressionError, build_batch)

NO_TIMESTAMP = -1
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_SET_ENTRY = struct.Struct(">qi")
_V0_HEAD = struct.Struct(">IbB")      # crc, magic, attributes
_V1_HEAD = struct.Struct(">IbBq")     # ... and timestamp
_I32 = struct.Struct(">i")


class LegacyMessage:
    __slots__ = ("offset", "magic", "attributes", "timestamp", "key", "value")

    def __init__(self, offset, magic, attributes, timestamp, key, value):
        self.offset, self.magic, self.attributes = offset, magic, attributes
        self.timestamp, self.key, self.value = timestamp, key, value


def is_legacy(buf) -> bool:
    """Whether `buf` starts with a magic 0/1 message (the magic sits where a batch's does)."""
    return buf is not None and len(buf) > 16 and buf[16] in (0, 1)


def _bytes_field(buf, pos: int, end: int):
    if pos + 4 > end:
        raise CorruptRecordError("message truncated in a length field")
    (length,) = _I32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError("message field runs past the message")
    return bytes(buf[pos:pos + length]), pos + length


def read_messages(buf) -> list[LegacyMessage]:
    """The messages of a message set (wrappers as they are); CRCs checked, as Kafka does."""
    messages = []
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < _SET_ENTRY.size:
            raise CorruptRecordError("trailing bytes after the last message")
        offset, size = _SET_ENTRY.unpack_from(buf, pos)
        start = pos + _SET_ENTRY.size
        if size < _V0_HEAD.size + 8 or start + size > end:
            raise CorruptRecordError(f"message size {size} is invalid or truncated")
        stop = start + size
        crc, magic, attributes = _V0_HEAD.unpack_from(buf, start)
        if magic not in (0, 1):
            raise InvalidRecordError(f"a message set cannot mix magic {magic} with older messages")
        if zlib.crc32(memoryview(buf)[start + 4:stop]) != crc:
            raise CorruptRecordError("message is corrupt (CRC mismatch)")
        if magic == 1:
            if size < _V1_HEAD.size + 8:
                raise CorruptRecordError(f"message size {size} is too small for magic 1")
            timestamp = _V1_HEAD.unpack_from(buf, start)[3]
            field = start + _V1_HEAD.size
        else:
            timestamp, field = NO_TIMESTAMP, start + _V0_HEAD.size
        key, field = _bytes_field(buf, field, stop)
        value, field = _bytes_field(buf, field, stop)
        if field != stop:
            raise CorruptRecordError("message has bytes after its value")
        messages.append(LegacyMessage(offset, magic, attributes, timestamp, key, value))
        pos = stop
    return messages


def to_batch(buf) -> bytes:
    """One v2 batch (offsets from 0) holding every message of the message set `buf`, compressed
    with the codec the producer used, as Kafka's LogValidator converts an old producer's set.
    A compressed wrapper's LogAppendTime flag is the broker's business (the topic decides)."""
    codec = Compression.NONE
    records = []
    for message in read_messages(buf):
        wrapper_codec = message.attributes & _CODEC_MASK
        if wrapper_codec == Compression.NONE:
            inner = [message]
        else:
            if wrapper_codec == Compression.ZSTD:
                raise UnsupportedCompressionError("ZStandard is not allowed in message format v0/v1")
            if message.value is None:
                raise CorruptRecordError("a compressed message has no value")
            try:
                inner = read_messages(compression.decompress(wrapper_codec, message.value))
            except compression.CompressionError as exc:
                raise CorruptRecordError(str(exc)) from None
            if any(m.attributes & _CODEC_MASK for m in inner):
                raise InvalidRecordError("compressed messages cannot be nested")
            codec = wrapper_codec
        for m in inner:
            records.append(SimpleRecord(value=m.value, key=m.key, timestamp=m.timestamp))
    if not records:
        raise InvalidRecordError("the message set holds no message")
    return build_batch(records, compression_type=codec)


def _message(offset: int, magic: int, attributes: int, timestamp: int, key, value) -> bytes:
    body = bytearray()
    body += struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(field))
            body += field
    crc = zlib.crc32(body)
    return _SET_ENTRY.pack(offset, len(body) + 4) + struct.pack(">I", crc) + bytes(body)


def from_batches(batches, magic: int, first_offset: int) -> bytes:
    """The message set, in `magic` 0 or 1, of the records of `batches` (protocol.records.RecordBatch)
    at or after `first_offset` (compressed batches whole): control batches dropped, headers and producer ids lost, each
    compressed batch one wrapper of the same codec (Kafka's down-conversion for old fetchers).
    Raises UnsupportedCompressionError for a ZStandard batch (old formats have no such codec)."""
    out = bytearray()
    for batch in batches:
        if batch.is_control:
            continue
        log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        codec = batch.compression
        # as Kafka: a compressed batch goes whole (its wrapper keeps the offsets, the consumer
        # skips what it did not ask for), an uncompressed one from the fetch offset
        records = [r for r in batch.records() if codec or r.offset >= first_offset]
        if not records:
            continue
        if codec == Compression.ZSTD:
            raise UnsupportedCompressionError("ZStandard data cannot be fetched in message format v0/v1")
        flag = _LOG_APPEND_TIME if log_append and magic == 1 else 0

        def stamp(record):
            return batch.max_timestamp if log_append else record.timestamp
        if codec == Compression.NONE:
            for record in records:
                out += _message(record.offset, magic, flag, stamp(record), record.key, record.value)
            continue
        inner = bytearray()
        last = records[-1].offset
        for record in records:   # magic 1: relative to the first (gaps after compaction kept)
            inner_offset = record.offset - records[0].offset if magic == 1 else record.offset
            inner += _message(inner_offset, magic, flag, stamp(record), record.key, record.value)
        wrapper_time = batch.max_timestamp if magic == 1 else NO_TIMESTAMP
        out += _message(last, magic, codec | flag, wrapper_time, None,
                        compression.compress(codec, bytes(inner)))
    return bytes(out)
