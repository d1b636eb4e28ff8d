"""Append validation: Kafka's LogValidator checks that need only batch headers.

The hot path parses the 61-byte header of each batch and checks the CRC; records
are read only for compacted topics (keys are mandatory there), as Kafka does.
"""

from __future__ import annotations

import enum

from protocol.records import (
    COMPRESSION_MASK, CONTROL_MASK, LOG_OVERHEAD, MIN_BATCH_LENGTH, NO_TIMESTAMP, TRANSACTIONAL_MASK,
    RecordBatch, RecordBatchError, build_batch, iter_batches,
)
from storage.config import LogConfig
from storage.errors import ErrorCode, InvalidBatchError, InvalidTimestampError


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


def validate_append(view: memoryview, origin: AppendOrigin, config: LogConfig, now: int,
                    where: str) -> list[RecordBatch]:
    """The batches of `view`, or InvalidBatchError / InvalidTimestampError with Kafka's code."""
    size = len(view)
    if size > config.segment_bytes:
        raise InvalidBatchError(
            f"message batch size is {size} bytes which exceeds the maximum configured "
            f"segment size of {config.segment_bytes}", ErrorCode.RECORD_LIST_TOO_LARGE)
    try:
        batches = split_batches(view)
        for batch in batches:
            batch.ensure_valid()
    except RecordBatchError as exc:
        raise InvalidBatchError(exc.message, exc.error_code) from exc
    if origin is AppendOrigin.REPLICATION:
        for batch in batches:
            _check_size_and_codec(batch, config)
        return batches
    client = origin is AppendOrigin.CLIENT
    check_ts = not config.log_append_time
    low = now - config.message_timestamp_before_max_ms
    high = now + config.message_timestamp_after_max_ms
    for batch in batches:
        _check_size_and_codec(batch, config)
        attributes = batch.attributes
        count = batch.record_count
        if count != batch.last_offset_delta + 1 or count <= 0:
            raise InvalidBatchError(
                f"record batch has {count} records but last offset delta "
                f"{batch.last_offset_delta}", ErrorCode.INVALID_RECORD)
        if attributes & CONTROL_MASK and client:
            raise InvalidBatchError("clients are not allowed to write control records",
                                    ErrorCode.INVALID_RECORD)
        if attributes & TRANSACTIONAL_MASK and batch.producer_id < 0:
            raise InvalidBatchError("transactional batch without a producer id", ErrorCode.INVALID_RECORD)
        if client and config.compact and not attributes & CONTROL_MASK:
            _require_keys(batch, where)
        if check_ts:
            # Header timestamps only (the hot path never parses records): the first
            # record's and the largest.
            for ts in (batch.base_timestamp, batch.max_timestamp):
                if ts != NO_TIMESTAMP and (ts < low or ts > high):
                    raise InvalidTimestampError(
                        f"timestamp {ts} of the batch is out of the accepted range "
                        f"(message.timestamp.before.max.ms / after.max.ms)")
    return batches


def _check_size_and_codec(batch: RecordBatch, config: LogConfig) -> None:
    if batch.batch_length + LOG_OVERHEAD > config.max_message_bytes:
        raise InvalidBatchError(
            f"the record batch is {batch.size} bytes, larger than max.message.bytes "
            f"{config.max_message_bytes}", ErrorCode.MESSAGE_TOO_LARGE)
    if batch.attributes & COMPRESSION_MASK > 4:
        raise InvalidBatchError(f"unknown compression codec {batch.attributes & COMPRESSION_MASK}",
                                ErrorCode.CORRUPT_MESSAGE)


def _require_keys(batch: RecordBatch, where: str) -> None:
    """Compacted topics refuse records without keys (Kafka's LogValidator)."""
    try:
        for record in batch.records():
            if record.key is None:
                raise InvalidBatchError(
                    f"Compacted topic cannot accept message without key in topic partition {where}.",
                    ErrorCode.INVALID_RECORD)
    except RecordBatchError as exc:
        raise InvalidBatchError(exc.message, exc.error_code) from exc


TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def apply_topic_compression(batches: list[RecordBatch], config: LogConfig) -> list[RecordBatch]:
    """compression.type other than "producer": Kafka re-encodes data batches in the
    topic's codec (offsets, producer fields and timestamps kept).  The default
    ("producer") leaves the bytes untouched."""
    target = TOPIC_CODECS.get(config.compression_type)
    if target is None:
        return batches
    out = []
    for batch in batches:
        if batch.is_control or batch.compression == target:
            out.append(batch)
            continue
        try:
            records = list(batch.records())
        except RecordBatchError as exc:
            raise InvalidBatchError(exc.message, exc.error_code) from exc
        data = build_batch(
            records, base_offset=batch.base_offset, compression_type=target,
            timestamp_type=batch.timestamp_type, producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
            transactional=batch.is_transactional, partition_leader_epoch=batch.partition_leader_epoch,
            base_timestamp=batch.base_timestamp, max_timestamp=batch.max_timestamp,
            last_offset_delta=batch.last_offset_delta)
        out.append(RecordBatch(data, 0))
    return out
