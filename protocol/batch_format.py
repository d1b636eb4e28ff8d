"""The vocabulary of Kafka's RecordBatch v2 (magic 2): header layout, attribute bits, the
enums, the errors a bad batch raises and the record tuples (see protocol.records)."""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple, Sequence

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

CONTROL_KEY = struct.Struct(">hh")     # a marker's key: version, type
CONTROL_VALUE = struct.Struct(">hi")   # its value: version, coordinator epoch


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


def check_magic(magic: int) -> None:
    if magic != CURRENT_MAGIC:
        raise InvalidRecordError(
            f"record batches with magic {magic} are not supported; "
            f"only record batches with magic version 2 are allowed")
