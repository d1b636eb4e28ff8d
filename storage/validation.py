"""Append validation: what Kafka's LogValidator checks before a client batch reaches the log.

Every batch: its 61-byte header and CRC. Every client record too, as Kafka does (a stored
malformed batch would stop every consumer after it): walked in place by its length varints
(protocol.recordscan, C when built), compressed ones decompressed as a stream. Records that
break a per-record rule (no key on a compacted topic, a timestamp out of the accepted range)
fail the whole batch with one error per record (KIP-467's record_errors).
"""

from __future__ import annotations

import enum

from protocol import recordscan
from protocol.compression import CompressionError
from protocol.records import (
    COMPRESSION_MASK, CONTROL_MASK, LOG_OVERHEAD, MIN_BATCH_LENGTH, TRANSACTIONAL_MASK,
    RecordBatch, RecordBatchError, SimpleRecord, build_batch, iter_batches,
)
from storage.config import LogConfig
from storage.errors import ErrorCode, InvalidBatchError, InvalidTimestampRecordsError, RecordErrorsError


class AppendOrigin(enum.Enum):
    CLIENT = "client"            # Produce: validate everything, assign offsets
    COORDINATOR = "coordinator"  # transaction markers and internal topics: control batches allowed
    REPLICATION = "replication"  # follower fetch: offsets already assigned, kept as they are


def split_batches(view: memoryview) -> list[RecordBatch]:
    """The batches of an append; one header parse when it holds exactly one (Produce)."""
    if len(view) >= 61:
        first = RecordBatch(view, 0)
        if first.batch_length >= MIN_BATCH_LENGTH and first.batch_length + LOG_OVERHEAD == len(view):
            return [first]
    batches = list(iter_batches(view))
    if not batches:
        raise InvalidBatchError("no record batch in the append", ErrorCode.INVALID_RECORD)
    return batches


def validate_append(view: memoryview | None, origin: AppendOrigin, config: LogConfig, now: int,
                    where: str, parsed: list[RecordBatch] | None = None) -> list[RecordBatch]:
    """The batches of `view`, or InvalidBatchError (RecordErrorsError per record) with Kafka's code.
    `parsed`: the batches of the append, already split by the caller (`view` is then unused)."""
    if parsed is None:
        size = len(view)
    else:
        size = parsed[0].size if len(parsed) == 1 else sum([batch.size for batch in parsed])
    if size > config.segment_bytes:
        raise InvalidBatchError(
            f"message batch size is {size} bytes which exceeds the maximum configured "
            f"segment size of {config.segment_bytes}", ErrorCode.RECORD_LIST_TOO_LARGE)
    try:
        batches = split_batches(view) if parsed is None else parsed
        for batch in batches:
            batch.ensure_valid()
    except RecordBatchError as exc:
        raise InvalidBatchError(exc.message, exc.error_code) from exc
    if origin is AppendOrigin.REPLICATION:
        for batch in batches:
            _check_size_and_codec(batch, config)
        return batches
    client = origin is AppendOrigin.CLIENT
    for batch in batches:
        _check_size_and_codec(batch, config)
        attributes = batch.attributes
        count = batch.record_count
        if count != batch.last_offset_delta + 1 or count <= 0:
            raise InvalidBatchError(
                f"record batch has {count} records but last offset delta "
                f"{batch.last_offset_delta}", ErrorCode.INVALID_RECORD)
        if client and batch.base_offset != 0:
            # as Kafka 3.9: a producer's batch starts at offset 0 (the log assigns the real ones)
            raise InvalidBatchError(f"a client's record batch must have base offset 0, not {batch.base_offset}",
                                    ErrorCode.INVALID_RECORD)
        if attributes & CONTROL_MASK and client:
            raise InvalidBatchError("clients are not allowed to write control records",
                                    ErrorCode.INVALID_RECORD)
        if attributes & TRANSACTIONAL_MASK and batch.producer_id < 0:
            raise InvalidBatchError("transactional batch without a producer id", ErrorCode.INVALID_RECORD)
        if client:
            _check_records(batch, config, now, where)
    return batches


def _check_records(batch: RecordBatch, config: LogConfig, now: int, where: str) -> None:
    """Kafka's per-record checks of a client batch; raises with Kafka's codes."""
    flags = 0
    if batch.attributes & COMPRESSION_MASK:
        flags |= recordscan.CHECK_OFFSETS    # Kafka checks inner offsets of compressed batches
    if config.compact:
        flags |= recordscan.CHECK_KEYS
    low = high = 0
    if not config.log_append_time:
        flags |= recordscan.CHECK_TIMESTAMPS
        low = now - config.message_timestamp_before_max_ms
        high = now + config.message_timestamp_after_max_ms
    try:
        found, max_timestamp = recordscan.walk_batch(batch, flags, low, high)
    except recordscan.ScanError as exc:
        raise InvalidBatchError(str(exc), ErrorCode.INVALID_RECORD) from exc
    except CompressionError as exc:
        # Kafka's decompressors fail with a generic exception here, answered UNKNOWN_SERVER_ERROR
        # (not the retriable CORRUPT_MESSAGE: a client must not resend this batch forever).
        raise InvalidBatchError(str(exc), ErrorCode.UNKNOWN_SERVER_ERROR) from exc
    if found:
        raise _record_errors(found, batch, low, high, where)
    if max_timestamp != batch.max_timestamp and not config.log_append_time:
        # Kafka stores the records' real max timestamp (sarama 1.x writes -1 there, which left
        # ListOffsets by timestamp and time retention blind); the append rewrites the header
        batch.max_timestamp = max_timestamp


def _record_errors(found: list, batch: RecordBatch, low: int, high: int,
                   where: str) -> RecordErrorsError:
    """Kafka's RecordValidationException: the whole batch fails, each bad record named."""
    errors = []
    bad_timestamp = False
    for index, kind, timestamp, offset_delta in found:
        if kind == recordscan.NO_KEY:
            message = f"Compacted topic cannot accept message without key in topic partition {where}"
        else:
            bad_timestamp = True
            message = (f"Timestamp {timestamp} of message with offset {batch.base_offset + offset_delta} "
                       f"is out of range. The timestamp should be within "
                       f"[{_as_int64(low)}, {_as_int64(high)}]")
        errors.append((index, message))
    if bad_timestamp:
        return InvalidTimestampRecordsError(
            "One or more records have been rejected due to invalid timestamp",
            ErrorCode.INVALID_TIMESTAMP, errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return RecordErrorsError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        ErrorCode.INVALID_RECORD, errors)


def _as_int64(value: int) -> int:
    """Java's long arithmetic: Kafka prints now + Long.MAX_VALUE wrapped, and so do we."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _check_size_and_codec(batch: RecordBatch, config: LogConfig) -> None:
    if batch.batch_length + LOG_OVERHEAD > config.max_message_bytes:
        raise InvalidBatchError(
            f"the record batch is {batch.size} bytes, larger than max.message.bytes "
            f"{config.max_message_bytes}", ErrorCode.MESSAGE_TOO_LARGE)
    if batch.attributes & COMPRESSION_MASK > 4:
        # as Kafka 3.9, whose codec lookup fails inside: not the retriable CORRUPT_MESSAGE, which
        # a producer would resend forever
        raise InvalidBatchError(f"unknown compression codec {batch.attributes & COMPRESSION_MASK}",
                                ErrorCode.UNKNOWN_SERVER_ERROR)


TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def apply_topic_compression(batches: list[RecordBatch], config: LogConfig) -> list[RecordBatch]:
    """compression.type other than "producer": Kafka re-encodes data batches in another codec
    than the topic's (the one place a batch is rewritten).  The default ("producer") leaves the
    bytes untouched."""
    target = TOPIC_CODECS.get(config.compression_type)
    if target is None:
        return batches
    out = []
    for batch in batches:
        if batch.is_control or batch.compression == target:
            out.append(batch)
            continue
        try:
            records = [SimpleRecord(r.value, r.key, r.headers, r.timestamp, offset_delta=i)
                       for i, r in enumerate(batch.records())]
        except RecordBatchError as exc:
            raise InvalidBatchError(exc.message, exc.error_code) from exc
        # As Kafka's rebuild: offsets 0..n-1, the first record's timestamp as the base, the
        # largest as the max; producer fields kept (the log then stamps offsets and epoch).
        data = build_batch(
            records, base_offset=batch.base_offset, compression_type=target,
            timestamp_type=batch.timestamp_type, producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
            transactional=batch.is_transactional, partition_leader_epoch=batch.partition_leader_epoch,
            base_timestamp=records[0].timestamp if records else batch.base_timestamp)
        out.append(RecordBatch(data, 0))
    return out
