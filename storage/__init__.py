"""Odradek storage: partition logs with Kafka's on-disk layout.  Synchronous, no network.

Layout (one directory per partition, as Kafka writes it)::

    <log dir>/<topic>-<partition>/00000000000000000000.log        record batches, offsets assigned
                                 /00000000000000000000.index      relative offset -> position (8 B)
                                 /00000000000000000000.timeindex  max timestamp -> relative offset (12 B)
                                 /00000000000000000000.txnindex   aborted transactions (34 B)
                                 /00000000000000000042.snapshot   producer state at offset 42
                                 /leader-epoch-checkpoint, partition.metadata (topic id)
    <log dir>/recovery-point-offset-checkpoint, log-start-offset-checkpoint,
              replication-offset-checkpoint (high watermarks), cleaner-offset-checkpoint,
              .kafka_cleanshutdown

Modules: `config` (LogConfig), `errors`, `files` (shared descriptors, FileSlice, LRU),
`index` (.index/.timeindex), `txn_index`, `segment`, `validation` (append checks),
`producer_state`, `epochs` (leader epoch cache), `checkpoints`, `log` (Log), `cleaner`
(compaction), `manager` (LogManager).

Public surface
--------------
``LogManager(log_dirs, defaults=None, *, max_open_files=None)``
    Opens every ``<topic>-<partition>`` dir found (recovering after an unclean stop).
    ``max_open_files``: segments kept open at once (LRU; default RLIMIT_NOFILE/6).
    ``defaults`` is a LogConfig or a mapping of Kafka topic config names
    (``{"segment.bytes": ..., "retention.ms": ...}``, strings or parsed values).
    - ``get_or_create_log(topic, partition, overrides=None) -> Log``; ``get_log(...) -> Log | None``
    - ``set_topic_config(topic, overrides)`` / ``set_defaults(mapping)``: live logs follow at once
    - ``delete_log(topic, partition)``: dir renamed ``*-delete``, removed after file.delete.delay.ms
    - ``tick(now_ms=None)``: flush.ms, flush of rolled segments, retention, delayed deletes,
      producer expiry and (unless ``start_cleaner()`` runs a cleaner thread) one compaction
      pass; call every few seconds from a worker thread
    - ``start_cleaner(interval_s=15)`` / ``stop_cleaner()``; ``clean_one()``
    - ``uncleanable_partitions``: (topic, partition)s the cleaner failed on (KIP-346); each
      failure is logged once, that log is skipped until a restart, a config change or its
      deletion, and every other log keeps being cleaned; neither ``tick`` nor ``clean_one``
      raises because of a cleaning failure
    - ``checkpoint()``; ``close()`` (clean shutdown: flush, checkpoints, clean marker)
    - ``offline_dirs`` / ``offline_partitions``: a dir failing with an I/O error goes offline
      alone; ``get_or_create_log`` on its partitions raises KafkaStorageError
    - ``get_or_create_log(..., topic_id=...)`` records/checks Kafka's ``partition.metadata``

``Log`` (one partition; every method is thread-safe, one lock per partition)
    - ``append(records, *, leader_epoch=-1, origin=AppendOrigin.CLIENT, now_ms=None) -> AppendResult``
      ``records`` is the request's bytes/memoryview, written as is (a fresh 61-byte
      header per batch + the caller's body slice via pwritev; never copied).  Validates
      magic 2, lengths, CRC32C, record count vs last offset delta, max.message.bytes,
      timestamps vs message.timestamp.{before,after}.max.ms (batch header timestamps),
      control batches only from COORDINATOR; stamps LogAppendTime when configured; a
      topic compression.type other than "producer" re-encodes client batches in that codec.
      ``AppendResult(first_offset, last_offset, log_append_time, log_start_offset, duplicate)``.
      ``AppendOrigin.REPLICATION`` keeps the offsets the batches carry.
    - ``read(fetch_offset, max_bytes, max_offset=None, min_one_batch=True) -> list[FileSlice]``
      Starts at the batch containing fetch_offset, whole batches only, at most max_bytes
      (but the first batch whole if it alone is larger), only batches whose last offset
      < max_offset (pass the high watermark or last stable offset).  Raises
      OffsetOutOfRangeError outside [log_start_offset, log_end_offset].
      ``FileSlice``: ``fileno()``, ``position``, ``len()``, ``read()`` -- for os.sendfile;
      it keeps its descriptor open while it lives.
    - ``log_start_offset``, ``log_end_offset``, ``high_watermark`` (set by the caller with
      ``set_high_watermark``), ``last_stable_offset``, ``recovery_point``, ``size_bytes``
    - ``offset_for_timestamp(ts) -> TimestampOffset(offset, timestamp, leader_epoch) | None``
      (first record with timestamp >= ts); ``max_timestamp_offset()`` (ListOffsets -3)
    - ``end_offset_for_epoch(epoch) -> (epoch, end_offset)`` (OffsetForLeaderEpoch; (-1, -1) unknown)
    - ``delete_records(offset)`` (DeleteRecords, -1 = high watermark) -> new log start offset;
      POLICY_VIOLATION on compact-only topics, OFFSET_OUT_OF_RANGE above the high watermark
    - ``truncate_to(offset)``, ``truncate_fully_and_start_at(offset)`` (replica truncation)
    - ``flush(up_to=None)``; ``wait_flushed(offset)``: group commit for fsync-before-ack --
      blocks (call via trio.to_thread.run_sync) until every offset < offset is on disk;
      one fsync covers all appends that arrived meanwhile
    - ``apply_retention(now_ms=None)``, ``roll()``, ``update_config(LogConfig)``, ``close()``
      (a closed log answers KAFKA_STORAGE_ERROR)
    - idempotence/transactions: batches with a producer id are checked against the producer
      state (``storage.producer_state``): a retry of one of the last 5 batches returns the
      original offsets (``AppendResult.duplicate``), a sequence gap raises
      OutOfOrderSequenceError, an old epoch InvalidProducerEpochError, a non-transactional
      batch inside an open transaction InvalidTxnStateError, a stale marker
      TRANSACTION_COORDINATOR_FENCED; unknown producers may start at any sequence (Kafka).
      Snapshots (``<offset>.snapshot``) at each roll and clean close.
    - ``last_stable_offset`` (first transaction still open, or decided with its marker not
      yet below the high watermark; capped by the high watermark),
      ``aborted_transactions(fetch_offset, upper_bound) -> [AbortedTxn(producer_id,
      first_offset, last_offset, last_stable_offset)]`` for read_committed Fetch (from the
      ``.txnindex`` files); markers are appended with ``origin=AppendOrigin.COORDINATOR``
      (build them with ``protocol.records.build_control_batch``)
    - ``expire_producers(now_ms)`` (producer.id.expiration.ms; the manager's tick calls it)
    - ``clean(now_ms=None, force=False)``: one compaction pass (see ``storage.cleaner``):
      last record per key, tombstones and markers dropped once delete.retention.ms has
      passed (delete horizon stamped in the batch header), aborted data dropped, offsets
      kept, batches re-compressed with their codec, min.cleanable.dirty.ratio and
      min/max.compaction.lag.ms honoured, swapped in atomically (.cleaned -> .swap)
    - ``topic_id`` / ``assign_topic_id(id)``

Recovery: the manager passes each log its recovery point and whether the dir had a
clean-shutdown marker.  After an unclean stop only segments from the one holding the
recovery point are scanned (length, magic, CRC, offset order); the first bad batch and
everything after it are cut; indexes, the txn index and producer state are rebuilt
(producer state from the newest snapshot plus replayed batch headers).  Nothing below
the recovery point (fsynced) is touched.

Errors: every deliberate failure is a ``StorageError`` subclass carrying ``error_code``
(the Kafka error code to answer with): ``InvalidBatchError`` (CORRUPT_MESSAGE,
INVALID_RECORD, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, ...), ``InvalidTimestampError``,
``OffsetOutOfRangeError``, ``KafkaStorageError`` (I/O failure; the log is offline from then on).

``LogConfig`` holds the topic settings (Kafka names via ``LogConfig.from_mapping``).
"""

from storage.config import LogConfig
from storage.errors import (
    ErrorCode, InvalidBatchError, InvalidProducerEpochError, InvalidTimestampError,
    InvalidTxnStateError, KafkaStorageError, OffsetOutOfRangeError, OutOfOrderSequenceError,
    StorageError,
)
from storage.files import FileSlice
from storage.log import AppendOrigin, AppendResult, Log, TimestampOffset
from storage.manager import LogManager

__all__ = [
    "AppendOrigin", "AppendResult", "ErrorCode", "FileSlice", "InvalidBatchError",
    "InvalidProducerEpochError", "InvalidTimestampError", "InvalidTxnStateError",
    "KafkaStorageError", "Log", "LogConfig", "LogManager", "OffsetOutOfRangeError",
    "OutOfOrderSequenceError", "StorageError", "TimestampOffset",
]
