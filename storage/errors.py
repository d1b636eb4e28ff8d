"""Typed storage errors; each carries the Kafka error code the broker answers with."""

from __future__ import annotations

import enum

try:  # the wire codec's full table, once it has landed
    from protocol import ErrorCode  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - the few codes storage needs, until then
    class ErrorCode(enum.IntEnum):
        UNKNOWN_SERVER_ERROR = -1
        OFFSET_OUT_OF_RANGE = 1
        CORRUPT_MESSAGE = 2
        MESSAGE_TOO_LARGE = 10
        RECORD_LIST_TOO_LARGE = 18
        INVALID_TIMESTAMP = 32
        INVALID_REQUEST = 42
        OUT_OF_ORDER_SEQUENCE_NUMBER = 45
        DUPLICATE_SEQUENCE_NUMBER = 46
        INVALID_PRODUCER_EPOCH = 47
        INVALID_TXN_STATE = 48
        KAFKA_STORAGE_ERROR = 56
        UNKNOWN_PRODUCER_ID = 59
        UNSUPPORTED_COMPRESSION_TYPE = 76
        INVALID_RECORD = 87
        PRODUCER_FENCED = 90
        TRANSACTION_COORDINATOR_FENCED = 52


class StorageError(Exception):
    """Base of every error storage raises on purpose."""

    error_code: int = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, error_code: int | None = None):
        super().__init__(message)
        self.message = message
        if error_code is not None:
            self.error_code = error_code


class InvalidBatchError(StorageError):
    """A batch failed validation (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, ...)."""


class InvalidTimestampError(InvalidBatchError):
    error_code = ErrorCode.INVALID_TIMESTAMP


class OffsetOutOfRangeError(StorageError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class OutOfOrderSequenceError(StorageError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(StorageError):
    error_code = ErrorCode.INVALID_TXN_STATE


class KafkaStorageError(StorageError):
    """An I/O failure: the log is offline until the broker restarts it."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR
