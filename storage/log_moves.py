"""Moving a partition's log to another log dir of the same broker (AlterReplicaLogDirs, KIP-113).

A *future log* `<dir>/<topic>-<p>.<id>-future` is built beside the current log: it takes the
current log's batches as they are (offsets, leader epochs, producer state), follows its
truncations and log start, and once caught up replaces it in one step under the current log's
lock (`LogMoves.finish_move`), so no append lands in the log being retired.

Crash safety rests on one marker file, written (and fsynced) into the future log's directory
once it holds everything: a directory with the marker is the partition's log, whatever else a
restart finds. At start-up (`LogMoves._adopt_futures`):
- a future log with the marker finishes its move (the current log goes);
- a future log without it resumes copying when its current log is there, else it is left alone
  (its current log may be in a dir that failed);
- the same partition in two dirs (a crash between the two renames) keeps the marked one.

A mixin of `storage.manager.LogManager`; no networking: the broker drives the copying.
"""

from __future__ import annotations

import logging
import os
import time
import uuid

from storage import checkpoints
from storage.errors import ErrorCode, KafkaStorageError, StorageError
from storage.log import FUTURE_DIR_SUFFIX, Log, parse_log_dir_name
from storage.validation import AppendOrigin

MOVE_COMPLETE = "move-complete"   # in a future log's dir: it holds every record, it wins
COPY_CHUNK_BYTES = 1 << 20        # copied per step while the current log's lock is held
FLUSH_EVERY_BYTES = 64 << 20      # the copy is fsynced as it goes: the swap flushes only a tail
DELETE_DIR_SUFFIX = "-delete"

logger = logging.getLogger(__name__)


def future_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def _retired_name(directory: str) -> str:
    return f"{directory.rstrip('/')}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


def _first_base_offset(data: bytes) -> int:
    return int.from_bytes(data[:8], "big", signed=True)


class FutureLog:
    """A copy of a partition's current log being built in another log dir."""

    def __init__(self, log: Log, log_dir: str):
        self.log = log
        self.log_dir = log_dir
        self.unflushed_bytes = 0

    def offset_lag(self, current: Log) -> int:
        """How far the copy is behind (DescribeLogDirs' OffsetLag of a future replica)."""
        return current.log_end_offset - self.log.log_end_offset

    def copy_from(self, current: Log, max_bytes: int = COPY_CHUNK_BYTES) -> int:
        """Copy the next batches of `current` (up to about max_bytes); returns the bytes copied,
        0 once the copy reached the current log's end (as it was when read). Reading happens
        under the current log's lock, so what is copied is a state the current log really had;
        later truncations are caught by `_follow`."""
        with current._lock:
            current._check_online()
            self._follow(current)
            offset, end = self.log.log_end_offset, current.log_end_offset
            if offset >= end:
                return 0
            data = b"".join(piece.read() for piece in current.read(offset, max_bytes))
        if data and _first_base_offset(data) < self.log.log_end_offset:
            # a batch the cleaner rewrote across our log end: take it again whole
            self.log.truncate_to(_first_base_offset(data))
        if data:
            self.log.append(data, origin=AppendOrigin.REPLICATION)
        return 0 if self.log.log_end_offset >= end else len(data)

    def _follow(self, current: Log) -> None:
        """Undo what the current log no longer has (a follower's truncation, by leader epochs
        as a follower checks its leader) and follow its log start (retention, DeleteRecords)."""
        future = self.log
        while future.log_end_offset > future.log_start_offset and future.latest_epoch >= 0:
            latest = future.latest_epoch
            epoch, end = current.end_offset_for_epoch(latest)
            if epoch == latest and end >= future.log_end_offset:
                break
            if epoch < 0:
                future.truncate_fully_and_start_at(current.log_start_offset)
                break
            cut = end if epoch == latest else min(end, future.end_offset_for_epoch(epoch)[1])
            future.truncate_to(cut)
        if future.log_end_offset > current.log_end_offset:
            future.truncate_to(current.log_end_offset)
        if current.log_start_offset > future.log_end_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
        elif current.log_start_offset > future.log_start_offset:
            future.advance_log_start_offset(current.log_start_offset)

    def take_epochs_and_watermark(self, current: Log) -> None:
        """The current log's leader epochs (also those started without an append, and those
        from below a mid-batch log start) and high watermark, once the copy holds the same
        records: it answers OffsetForLeaderEpoch and Fetch as the current log did."""
        self._follow(current)   # (a log start in the middle of the last batch copied)
        self.log.epochs.copy_from(current.epochs)
        self.log.set_high_watermark(current.high_watermark)


class LogMoves:
    """LogManager's side of moving logs between its dirs (`self._futures`: key -> FutureLog)."""

    def future_logs(self) -> dict[tuple[str, int], FutureLog]:
        with self._lock:
            return dict(self._futures)

    def dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def start_move(self, topic: str, partition: int, log_dir: str) -> bool:
        """Start moving a partition's log to `log_dir` (an absolute path among log_dirs). Returns
        whether a move is now under way (False: the log is there already; a move elsewhere is
        dropped). Raises LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR (dir offline), or
        REPLICA_NOT_AVAILABLE when there is no such log here."""
        if log_dir not in self.log_dirs:
            raise StorageError(f"Log dir {log_dir} is not found in the config.",
                               ErrorCode.LOG_DIR_NOT_FOUND)
        if log_dir in self.offline_dirs:
            raise KafkaStorageError(f"Log directory {log_dir} is offline")
        key = (topic, partition)
        with self._lock:
            current = self._logs.get(key)
            if current is None:
                if key in self.offline_partitions:
                    raise KafkaStorageError(f"Partition {topic}-{partition} is offline")
                raise StorageError(f"Replica of {topic}-{partition} is not on this broker",
                                   ErrorCode.REPLICA_NOT_AVAILABLE)
            future = self._futures.get(key)
            if future is not None and future.log_dir == log_dir:
                return True
            if future is not None:
                self.cancel_move(topic, partition)
            if self._dir_of.get(key) == log_dir:
                return False
            log = Log(os.path.join(log_dir, future_dir_name(topic, partition)),
                      self._config_for(topic), handles=self.handles,
                      log_start_offset=current.log_start_offset, clock=self.clock)
            if current.topic_id is not None:
                log.assign_topic_id(current.topic_id)
            self._futures[key] = FutureLog(log, log_dir)
            self._uncleanable.discard(key)
        logger.info("moving %s-%d from %s to %s", topic, partition, self._dir_of.get(key), log_dir)
        return True

    def prefer_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """Where the partition's log goes if it is created here later (a reassignment bringing a
        replica, with AlterReplicaLogDirs asked first, as kafka-reassign-partitions does)."""
        with self._lock:
            if (topic, partition) not in self._logs and log_dir in self.log_dirs:
                self._preferred_dirs[(topic, partition)] = log_dir

    def copy_to_future(self, topic: str, partition: int, max_bytes: int = COPY_CHUNK_BYTES) -> int:
        """One copying step of a move (a worker thread): bytes copied, 0 when caught up (what
        arrived since is left to `finish_move`), -1 when the move is gone (cancelled, or the
        partition deleted)."""
        key = (topic, partition)
        with self._lock:
            current, future = self._logs.get(key), self._futures.get(key)
        if current is None or future is None:
            return -1
        try:
            copied = future.copy_from(current, max_bytes)
            future.unflushed_bytes += copied
            if copied == 0 or future.unflushed_bytes >= FLUSH_EVERY_BYTES:
                future.log.flush()   # (no lock of the current log held)
                future.unflushed_bytes = 0
            return copied
        except StorageError:
            if self._futures.get(key) is not future:
                return -1   # cancelled meanwhile: its log was closed under us
            raise

    def finish_move(self, topic: str, partition: int, on_switch=None) -> Log | None:
        """Copy the rest and put the future log in the current log's place, atomically for
        appenders: `on_switch(new_log)` runs before the current log's lock is released, so a
        caller can point its readers and writers at the new log. The old dir is then renamed
        for deletion. Returns the new log (None when there was no move to finish)."""
        key = (topic, partition)
        with self._lock:
            current, future = self._logs.get(key), self._futures.get(key)
            if current is None or future is None:
                return None
            with current._lock:
                held_since = time.monotonic()
                while future.copy_from(current):
                    pass
                new = self._promote(key, current, future)
                if on_switch is not None:
                    on_switch(new)
                old_dir = current.directory
                current.close()
                held_ms = (time.monotonic() - held_since) * 1000
        retired = _retired_name(old_dir)
        os.replace(old_dir, retired)
        checkpoints.fsync_dir(os.path.dirname(old_dir))
        os.remove(os.path.join(new.directory, MOVE_COMPLETE))   # the old log is gone for good
        checkpoints.fsync_dir(new.directory)
        with self._lock:
            self._pending_dir_deletes.append((self.clock() + new.config.file_delete_delay_ms, retired))
        for log_dir in (os.path.dirname(old_dir), future.log_dir):
            self._write_checkpoints(log_dir)
        logger.info("moved %s-%d to %s (appends held back %.1f ms for the swap)", topic, partition,
                    future.log_dir, held_ms)
        return new

    def _promote(self, key, current: Log, future: FutureLog) -> Log:
        """Under both locks: mark the caught-up future log complete, rename it to the
        partition's name and open it as the partition's log."""
        log = future.log
        future.take_epochs_and_watermark(current)
        log.flush()
        log.close_clean()
        marker = os.path.join(log.directory, MOVE_COMPLETE)
        checkpoints.write_atomically(marker, "")
        final = os.path.join(future.log_dir, f"{key[0]}-{key[1]}")
        log.close()
        try:
            os.replace(log.directory, final)
            new = self._open(final, key[0], log.log_end_offset, log.log_start_offset,
                             current.high_watermark, clean=True)
        except Exception:
            # the current log stays the partition's: the copy must not win at the next start
            del self._futures[key]
            for path in (log.directory, final):
                if os.path.exists(path):
                    os.replace(path, _retired_name(path))
            raise
        del self._futures[key]
        self._logs[key] = new
        self._dir_of[key] = future.log_dir
        return new

    def _open(self, path: str, topic: str, recovery_point: int, log_start_offset: int,
              high_watermark: int, clean: bool) -> Log:
        log = Log(path, self._config_for(topic), handles=self.handles,
                  recovery_point=recovery_point, log_start_offset=log_start_offset,
                  high_watermark=high_watermark, clean_shutdown=clean, clock=self.clock)
        log.on_offline = self._log_failed
        return log

    def cancel_move(self, topic: str, partition: int) -> bool:
        """Drop a partition's future log (its dir renamed for deletion)."""
        with self._lock:
            future = self._futures.pop((topic, partition), None)
        if future is None:
            return False
        self._retire_dir(future.log)
        return True

    def _retire_dir(self, log: Log) -> None:
        log.close()
        try:
            retired = _retired_name(log.directory)
            os.replace(log.directory, retired)
        except OSError:
            logger.exception("could not remove the log dir %s", log.directory)
            return
        with self._lock:
            self._pending_dir_deletes.append((self.clock() + log.config.file_delete_delay_ms, retired))

    # -- start-up ----------------------------------------------------------------------------
    def _load_duplicate(self, key, path: str) -> bool:
        """`path` holds a partition already loaded from another dir: a move stopped between its
        two renames. The dir with the marker wins; returns whether `path` is to be loaded."""
        existing = self._logs[key]
        if os.path.exists(os.path.join(path, MOVE_COMPLETE)):
            self._logs.pop(key)
            del self._dir_of[key]
            self._retire_dir(existing)
            return True
        if os.path.exists(os.path.join(existing.directory, MOVE_COMPLETE)):
            os.replace(path, _retired_name(path))
            return False
        logger.error("%s-%d is in two log dirs (%s and %s), neither marked as the copy that "
                     "replaced the other: serving the first, leaving the second on disk",
                     key[0], key[1], existing.directory, path)
        return False

    def _adopt_futures(self, found: list[tuple[str, str, bool]]) -> None:
        """After every dir is loaded: finish the moves that were complete, resume the others."""
        for log_dir, path, clean in found:
            key = parse_log_dir_name(os.path.basename(path))
            current = self._logs.get(key)
            try:
                if os.path.exists(os.path.join(path, MOVE_COMPLETE)):
                    if current is not None:
                        self._logs.pop(key)
                        del self._dir_of[key]
                        self._retire_dir(current)
                    final = os.path.join(log_dir, f"{key[0]}-{key[1]}")
                    os.replace(path, final)
                    self._logs[key] = self._open(final, key[0], 0, 0, 0, clean)
                    self._dir_of[key] = log_dir
                    logger.info("finished moving %s-%d to %s", key[0], key[1], log_dir)
                elif current is not None and key not in self._futures:
                    log = Log(path, self._config_for(key[0]), handles=self.handles,
                              clean_shutdown=clean, clock=self.clock)
                    self._futures[key] = FutureLog(log, log_dir)
                    logger.info("resuming the move of %s-%d to %s", key[0], key[1], log_dir)
                else:
                    logger.warning("future log %s has no current log here: left alone", path)
            except (OSError, StorageError):
                logger.exception("could not load the future log %s: moving %s-%d starts over",
                                 path, key[0], key[1])
        for key, log in self._logs.items():
            marker = os.path.join(log.directory, MOVE_COMPLETE)
            if os.path.exists(marker):
                os.remove(marker)   # every other copy of the partition is gone by now
