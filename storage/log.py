"""A partition log: an ordered list of segments in `<topic>-<partition>/`.

See the package docstring for the public surface.  Appending (`log_append`), reading
(`log_read`), retention (`log_retention`) and truncation (`log_truncation`) are mixins in
modules of their own.  Everything that changes the
log happens under the partition lock; fsync (flush, group commit) runs outside it
so a slow disk never stalls appends to the page cache.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from typing import Callable

from protocol.records import RecordBatch
from storage import checkpoints
from storage.config import LogConfig
from storage.epochs import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from storage.errors import ErrorCode, KafkaStorageError, StorageError
from storage.files import OpenFiles
from storage.log_append import AppendResult, LogAppends
from storage.log_read import LogReads, TimestampOffset
from storage.log_retention import LogRetention
from storage.log_truncation import LogTruncation
from storage.producer_state import CompletedTxn, ProducerStateManager
from storage.segment import (
    CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, SEGMENT_SUFFIXES, SWAP_SUFFIX, LogSegment,
    finish_swap,
)
from storage.txn_index import AbortedTxn
from storage.validation import AppendOrigin

__all__ = ["AppendOrigin", "AppendResult", "Log", "TimestampOffset", "parse_partition_dir"]

PARTITION_METADATA = "partition.metadata"
FUTURE_DIR_SUFFIX = "-future"   # a log being copied to another log dir: `<topic>-<p>.<id>-future`


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_partition_dir(name: str) -> tuple[str, int]:
    """`my-topic-3` -> ("my-topic", 3)."""
    topic, _, partition = name.rpartition("-")
    if not topic or not partition.isdigit():
        raise ValueError(f"not a partition directory name: {name!r}")
    return topic, int(partition)


def parse_log_dir_name(name: str) -> tuple[str, int]:
    """parse_partition_dir() that also reads a future log's `my-topic-3.<id>-future`."""
    if name.endswith(FUTURE_DIR_SUFFIX):
        name = name[:-len(FUTURE_DIR_SUFFIX)].rpartition(".")[0]
    return parse_partition_dir(name)


def _make_directory(directory: str) -> bool:
    """Create a partition directory (and missing parents); False if it already existed."""
    try:
        os.mkdir(directory)
    except FileExistsError:
        return False
    except FileNotFoundError:
        os.makedirs(directory)   # a parent was missing too: every level made here
    return True


class Log(LogAppends, LogReads, LogRetention, LogTruncation):
    def __init__(self, directory: str, config: LogConfig | None = None, *,
                 handles: OpenFiles | None = None, recovery_point: int = 0,
                 log_start_offset: int = 0, high_watermark: int = 0, clean_shutdown: bool = True,
                 cleaner_checkpoint: int = 0, clock: Callable[[], int] = _now_ms):
        self.directory = directory
        self.topic, self.partition = parse_log_dir_name(os.path.basename(directory.rstrip("/")))
        self.name = f"{self.topic}-{self.partition}"   # as Kafka names a partition in messages
        self.config = config or LogConfig()
        self.handles = handles if handles is not None else OpenFiles()
        self.clock = clock
        self._lock = threading.RLock()
        self._flush_cond = threading.Condition(threading.Lock())
        self._flushing = False
        self.offline: str | None = None  # the I/O error that took the log offline
        # Told (once) when an I/O error takes this log offline: the manager reports its log dir.
        self.on_offline: Callable[["Log", BaseException], None] | None = None
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[int, list[str]]] = []  # (due ms, paths)
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        created = _make_directory(directory)
        self.producer_state = ProducerStateManager(directory)
        self.recovered_bytes_truncated = 0
        self.high_watermark = 0
        self.recovery_point = 0
        if created:
            self._start_empty(log_start_offset)
        else:
            self._load(recovery_point, log_start_offset, clean_shutdown)
        self.high_watermark = min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark(self.high_watermark)
        self.cleaner_checkpoint = min(cleaner_checkpoint, self.log_end_offset)  # first dirty offset

    # ======================================================================= loading
    def _start_empty(self, start_offset: int) -> None:
        """A directory this log just created: one empty segment, nothing to read or recover
        (a CreateTopics of thousands of partitions pays only a directory and a file each)."""
        segment = LogSegment(self.directory, start_offset, self.handles, created_ms=self.clock(), new=True)
        self._segments = [segment]
        self._bases = [start_offset]
        self.epochs = LeaderEpochCache(os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT), read=False)
        segment.activate()
        self.recovery_point = self.log_start_offset = start_offset
        self.producer_state.reset(start_offset)

    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        names = os.listdir(self.directory)
        bases = []
        swapped = set()
        for name in names:
            path = os.path.join(self.directory, name)
            if name.endswith(DELETED_SUFFIX) or name.endswith(CLEANED_SUFFIX) or name.endswith(".tmp"):
                os.remove(path)  # leftovers of deletion or of a cleaner run that never swapped
            elif name.endswith(SWAP_SUFFIX) and name.split(".")[0].isdigit():
                swapped.add(int(name.split(".")[0]))
        if swapped:
            from storage.cleaner import drop_absorbed
        for base in sorted(swapped):
            finish_swap(self.directory, base)  # a compaction swap interrupted by the stop
            drop_absorbed(self.directory, base, self.handles)
        for name in os.listdir(self.directory):
            if name.endswith(LOG_SUFFIX) and name[:-len(LOG_SUFFIX)].isdigit():
                bases.append(int(name[:-len(LOG_SUFFIX)]))
            elif any(name.endswith(s) for s in SEGMENT_SUFFIXES) and name.split(".")[0].isdigit():
                if not os.path.exists(os.path.join(self.directory, name.split(".")[0] + LOG_SUFFIX)):
                    os.remove(os.path.join(self.directory, name))  # an index without its log
        bases.sort()
        now = self.clock()
        for base in bases:
            self._segments.append(LogSegment(self.directory, base, self.handles, created_ms=now))
        if not self._segments:
            self._segments.append(LogSegment(self.directory, log_start_offset, self.handles, created_ms=now))
        self._bases = [s.base_offset for s in self._segments]
        self.epochs = LeaderEpochCache(os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT))

        if clean_shutdown:
            for segment in self._segments[:-1]:
                if not self._index_sane(segment):
                    segment.recover(index_interval=self.config.index_interval_bytes)
                    segment.seal()
                segment.load_sealed()
            active = self._segments[-1]
            if not self._index_sane(active):
                active.recover(index_interval=self.config.index_interval_bytes)
            active.activate()
            self.recovery_point = min(max(recovery_point, 0), active.next_offset)
            self._rebuild_producer_state(active.next_offset)
        else:
            self._recover(recovery_point)
        self.log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        self.epochs.truncate_from(self.log_end_offset)
        if self.log_end_offset < self.log_start_offset:
            # Recovery cut below the (checkpointed) log start: what is left was deleted
            # anyway, and offsets must not go back below the log start.
            self.truncate_fully_and_start_at(self.log_start_offset)

    def _index_sane(self, segment: LogSegment) -> bool:
        if segment.size == 0:
            return True
        idx = segment.offset_index
        for path, entry in ((idx.path, 8), (segment.time_index.path, 12)):
            if not os.path.exists(path):
                # An active segment's index files come with their first entry, and the first
                # entry needs more than index.interval.bytes before it: up to there, no file
                # is an empty index.  Past it, the file was lost: rebuild.
                if segment.size > self.config.index_interval_bytes:
                    return False
            elif os.path.getsize(path) % entry:
                return False
        if idx.entries:
            offset, position = idx.last_entry()
            if offset < segment.base_offset or position >= segment.size:
                return False
        return True

    def _recover(self, recovery_point: int) -> None:
        """After an unclean stop: scan segments from the one holding the recovery
        point, cut at the first bad batch, drop every later segment."""
        start = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        for segment in self._segments[:start]:
            if not self._index_sane(segment):
                segment.recover(index_interval=self.config.index_interval_bytes)
                segment.seal()
            segment.load_sealed()
        # Producer state up to the first segment to recover, then rebuilt batch by batch.
        self._rebuild_producer_state(self._segments[start].base_offset)
        for i in range(start, len(self._segments)):
            segment = self._segments[i]
            truncated = segment.recover(self._recovery_callback(segment),
                                        index_interval=self.config.index_interval_bytes,
                                        rebuild_txn_index=True)
            self.recovered_bytes_truncated += truncated
            if truncated and i + 1 < len(self._segments):
                for later in self._segments[i + 1:]:
                    self.recovered_bytes_truncated += later.size
                    later.close()
                    for path in later.paths():
                        if os.path.exists(path):
                            os.remove(path)
                del self._segments[i + 1:]
                break
        for segment in self._segments[:-1]:
            segment.seal()
        self._bases = [s.base_offset for s in self._segments]
        active = self._segments[-1]
        active.activate()
        for segment in self._segments[start:]:
            segment.flush()
        self.recovery_point = active.next_offset
        self.epochs.truncate_from(active.next_offset)
        self.epochs.write_unwritten()
        self.producer_state.map_end_offset = active.next_offset
        self.producer_state.delete_snapshots(above=active.next_offset)
        try:
            self.producer_state.take_snapshot()
        except OSError:
            pass  # only an optimisation: the next recovery replays a little more

    def _recovery_callback(self, segment: LogSegment):
        """Each recovered batch also restores its leader epoch, as Kafka's recovery does: a
        crash can come before a new epoch's checkpoint was written (it is written after
        becoming leader, off the event loop), never before its records reached the file."""
        replay = self._replay_callback(segment)
        epochs = self.epochs

        def on_batch(position: int, batch: RecordBatch) -> None:
            if batch.partition_leader_epoch > epochs.latest:
                epochs.assign(batch.partition_leader_epoch, batch.base_offset, write=False)
            replay(position, batch)
        return on_batch

    # ======================================================================= producer state
    def _replay_callback(self, segment: LogSegment | None):
        """Apply one batch read back from disk to the producer state (no validation);
        aborted transactions are written to `segment`'s txn index when given."""
        def on_batch(_position: int, batch: RecordBatch) -> None:
            if batch.producer_id < 0:
                return
            pending = self.producer_state.prepare(
                [(batch, batch.base_offset, batch.last_offset, batch.max_timestamp)],
                validate=False, read_control=lambda b: b.control_record())
            completed = self.producer_state.commit(pending, batch.next_offset)
            if segment is not None:
                self._index_aborted(segment, completed)
        return on_batch

    def _rebuild_producer_state(self, end_offset: int) -> None:
        """Latest snapshot at or below end_offset, then replay batch headers up to it."""
        state = self.producer_state
        start = state.load_snapshot(end_offset)
        if start is None:
            start = self._segments[0].base_offset
            state.reset(start)
        replay = self._replay_callback(None)
        i = max(0, bisect.bisect_right(self._bases, start) - 1)
        for segment in self._segments[i:]:
            if segment.base_offset >= end_offset:
                break
            for pos, header in segment.iter_headers(0 if segment.base_offset >= start else
                                                    segment.offset_index.lookup(start)[1], segment.size):
                if header.base_offset < start or header.producer_id < 0:
                    continue
                if header.base_offset >= end_offset:
                    break
                replay(pos, segment.read_batch(pos, header.size) if header.is_control else header)
        state.map_end_offset = end_offset

    def _index_aborted(self, segment: LogSegment, completed: list[CompletedTxn]) -> None:
        for txn in completed:
            if txn.is_aborted:
                segment.txn_index.append(AbortedTxn(
                    txn.producer_id, txn.first_offset, txn.last_offset, self.producer_state.lso_after(txn)))

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound) for read_committed
        Fetch (upper_bound: the offset just past the fetched data, or the LSO)."""
        with self._lock:
            out: list[AbortedTxn] = []
            i = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
            for segment in self._segments[i:]:
                found, complete = segment.txn_index.collect(fetch_offset, upper_bound)
                out.extend(found)
                if complete:
                    break
            return out

    def producer_last_offsets(self) -> dict[int, int]:
        with self._lock:
            return {pid: e.last_offset for pid, e in self.producer_state.producers.items()}

    def expire_producers(self, now_ms: int | None = None) -> None:
        now = self.clock() if now_ms is None else now_ms
        with self._lock:
            self.producer_state.expire(now, self.config.producer_id_expiration_ms)

    # ======================================================================= facts
    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest transaction that is open, or decided with its
        marker not yet below the high watermark; capped by the high watermark."""
        first_unstable = self.producer_state.first_unstable_offset
        if first_unstable is None:
            return self.high_watermark
        return min(first_unstable, self.high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset

    def set_high_watermark(self, offset: int) -> None:
        """The caller (replica manager) owns the high watermark; it is clamped to the log."""
        with self._lock:   # (comparisons, not min/max calls: once per append)
            if offset < self.log_start_offset:
                offset = self.log_start_offset
            end = self._segments[-1].next_offset
            self.high_watermark = offset if offset < end else end
            self.producer_state.on_high_watermark(self.high_watermark)

    def _check_online(self) -> None:
        if self.offline is not None:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is offline: {self.offline}")

    def _go_offline(self, exc: BaseException) -> KafkaStorageError:
        first = self.offline is None
        self.offline = f"{type(exc).__name__}: {exc}"
        if first and self.on_offline is not None:
            self.on_offline(self, exc)
        return KafkaStorageError(f"I/O error on {self.topic}-{self.partition}: {exc}")

    # ======================================================================= topic id
    @property
    def topic_id(self) -> str | None:
        """The topic id from `partition.metadata` (Kafka's base64 form), if recorded."""
        try:
            with open(os.path.join(self.directory, PARTITION_METADATA), encoding="utf-8") as f:
                fields = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
        except OSError:
            return None
        return fields.get("topic_id")

    def assign_topic_id(self, topic_id: str) -> None:
        """Record the topic id (Kafka's `partition.metadata`); a different recorded id
        means this directory belongs to an older topic of the same name."""
        current = self.topic_id
        if current == topic_id:
            return
        if current is not None:
            raise StorageError(
                f"{self.topic}-{self.partition} holds data of topic id {current}, not {topic_id}",
                ErrorCode.INCONSISTENT_TOPIC_ID)
        checkpoints.write_atomically(os.path.join(self.directory, PARTITION_METADATA),
                                     f"version: 0\ntopic_id: {topic_id}\n")

    # ======================================================================= flush
    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below `up_to` (default: the log end) and advance the
        recovery point.  The fsync itself runs without the partition lock."""
        self._write_epochs_before_flush()
        with self._lock:
            self._check_online()
            target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
            if target <= self.recovery_point:
                return
            segments = self._segments
            todo = [s for i, s in enumerate(segments)
                    if s.base_offset < target and
                    (segments[i + 1].base_offset if i + 1 < len(segments) else self.log_end_offset)
                    > self.recovery_point]
            self._unflushed_messages = 0
            self._last_flush_ms = self.clock()
        for segment in todo:
            try:
                segment.flush()
            except OSError as exc:
                with self._lock:
                    if any(s is segment for s in self._segments):
                        raise self._go_offline(exc) from exc
                    # deleted by retention meanwhile: nothing left to make durable
        with self._lock:
            self.recovery_point = max(self.recovery_point, target)

    def _flush_locked(self) -> None:
        # flush.messages reached inside append: the lock is reentrant.
        self.flush()

    def wait_flushed(self, offset: int) -> None:
        """Group commit: block until every offset below `offset` is fsynced.  One fsync
        covers all appends that arrived while the previous one ran.  Call it from a
        worker thread (trio.to_thread.run_sync) before acknowledging a produce, with
        `offset` = AppendResult.last_offset + 1."""
        offset = min(offset, self.log_end_offset)
        while True:
            with self._flush_cond:
                while self._flushing and self.recovery_point < offset:
                    self._flush_cond.wait()
                if self.recovery_point >= offset:
                    return
                self._flushing = True
            try:
                self.flush()
            finally:
                with self._flush_cond:
                    self._flushing = False
                    self._flush_cond.notify_all()

    def maybe_flush_by_time(self, now_ms: int | None = None) -> None:
        """flush.ms: called periodically by the LogManager."""
        now = self.clock() if now_ms is None else now_ms
        if self.recovery_point < self.log_end_offset and now - self._last_flush_ms >= self.config.flush_ms:
            self.flush()

    # ======================================================================= compaction
    def swap_cleaned_segments(self, olds: list[LogSegment], cleaned: LogSegment) -> bool:
        """Atomically replace a run of sealed segments by their cleaned copy (storage.cleaner),
        which starts at the first one's base offset. A run that changed meanwhile (a segment went
        away or became active) keeps its originals."""
        from storage.cleaner import swap_files
        with self._lock:
            idx = next((i for i, s in enumerate(self._segments) if s is olds[0]), None)
            end = len(olds) + (idx or 0)
            if idx is None or end >= len(self._segments) or self.offline is not None or \
                    any(a is not b for a, b in zip(self._segments[idx:end], olds)):
                cleaned.close()
                for path in cleaned.paths():
                    if os.path.exists(path):
                        os.remove(path)
                return False
            try:
                for old in olds:
                    old.close()
                swap_files(cleaned, olds[1:])
                fresh = LogSegment(self.directory, olds[0].base_offset, self.handles, created_ms=olds[-1].created_ms)
                if not self._index_sane(fresh):
                    fresh.recover(index_interval=self.config.index_interval_bytes)
                    fresh.seal()
                fresh.load_sealed()
            except OSError as exc:
                raise self._go_offline(exc) from exc
            self._segments[idx:end] = [fresh]
            self._bases[idx:end] = [fresh.base_offset]
            return True

    def clean(self, now_ms: int | None = None, *, force: bool = False, **options):
        """Run one compaction pass if due (cleanup.policy=compact); returns CleanerStats or None."""
        from storage import cleaner
        return cleaner.clean(self, now_ms, force=force, **options)

    # ======================================================================= lifecycle
    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config

    def close_clean(self, sync: bool = True) -> None:
        """Snapshot producer state at the log end so the next start replays nothing
        (sync=False when the caller syncs the whole filesystem afterwards)."""
        self.epochs.write_unwritten(sync)
        with self._lock:
            self.producer_state.map_end_offset = self.log_end_offset
            self.producer_state.take_snapshot(sync)

    def mark_flushed(self) -> None:
        """The caller made every file durable (syncfs): the recovery point is the log end."""
        with self._lock:
            self.recovery_point = self.log_end_offset
            self._unflushed_messages = 0

    def close(self) -> None:
        """Release files; later calls answer KAFKA_STORAGE_ERROR instead of reopening
        files of a log that may be gone (deleted topic, shutdown)."""
        with self._lock:
            if self.offline is None:
                self.offline = "closed"
            for segment in self._segments:
                segment.close()

    def __repr__(self) -> str:
        return (f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={len(self._segments)})")
