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

By job: `batch_format` (layout, enums, errors, record tuples), `record_batch` (the header view,
walks, Produce checks, patches), `record_decoding` (record walking), `record_building`; this
module re-exports them all, so callers import from here.

Every problem with the bytes raises `RecordBatchError` (subclasses
`CorruptRecordError`, `InvalidRecordError`, `UnsupportedCompressionError`), whose
`error_code` is the Kafka error code Kafka answers with.  Magic 0 and 1 batches
are refused with INVALID_RECORD, as Kafka 4 does ("... only allowed to contain
record batches with magic version 2").
"""

from __future__ import annotations

from protocol.batch_format import (
    ATTRIBUTES_OFFSET, COMPRESSION_MASK, CONTROL_MASK, CRC_START, CURRENT_MAGIC, DELETE_HORIZON_MASK, HEADER,
    HEADER_SIZE, LEADER_EPOCH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, MAX_TIMESTAMP_OFFSET, MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, Compression, ControlRecord, ControlType, CorruptRecordError,
    Header, InvalidRecordError, Record, RecordBatchError, SimpleRecord, TimestampType,
    UnsupportedCompressionError,
)
from protocol.record_batch import (
    RecordBatch, iter_batches, patched_header, set_base_offset, set_log_append_time,
    set_partition_leader_epoch, validate_produce_records,
)
from protocol.record_building import build_batch, build_control_batch, encode_record
from protocol.record_decoding import parse_control_record

__all__ = [
    "ATTRIBUTES_OFFSET", "COMPRESSION_MASK", "CONTROL_MASK", "CRC_START", "CURRENT_MAGIC",
    "DELETE_HORIZON_MASK", "HEADER", "HEADER_SIZE", "LEADER_EPOCH_OFFSET", "LOG_OVERHEAD", "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET", "MIN_BATCH_LENGTH", "NO_PARTITION_LEADER_EPOCH", "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID", "NO_SEQUENCE", "NO_TIMESTAMP", "TIMESTAMP_TYPE_MASK", "TRANSACTIONAL_MASK",
    "Compression", "ControlRecord", "ControlType", "CorruptRecordError", "Header", "InvalidRecordError",
    "Record", "RecordBatchError", "SimpleRecord", "TimestampType", "UnsupportedCompressionError",
    "RecordBatch", "iter_batches", "patched_header", "set_base_offset", "set_log_append_time",
    "set_partition_leader_epoch", "validate_produce_records", "build_batch", "build_control_batch",
    "encode_record", "parse_control_record",
]
