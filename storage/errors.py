"""Typed storage errors; each carries the Kafka error code the broker answers with."""

from __future__ import annotations

from protocol.errors import ErrorCode


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


class RecordErrorsError(InvalidBatchError):
    """Records of a batch broke per-record rules: the batch is refused and `record_errors` lists
    (batch index, message) per bad record (Produce v8+ record_errors, KIP-467)."""

    def __init__(self, message: str, error_code: int, record_errors: list[tuple[int, str]]):
        super().__init__(message, error_code)
        self.record_errors = record_errors


class InvalidTimestampRecordsError(RecordErrorsError, InvalidTimestampError):
    """RecordErrorsError where a record's timestamp is out of range (INVALID_TIMESTAMP)."""


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
