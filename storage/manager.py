"""LogManager: the partition logs under one or more log dirs."""

from __future__ import annotations

import collections
import logging
import os
import shutil
import threading
import uuid
from typing import Any, Callable, Mapping

from storage import checkpoints
from storage.config import LogConfig
from storage.errors import KafkaStorageError, StorageError
from storage.files import OpenFiles
from storage.log import FUTURE_DIR_SUFFIX, Log, _now_ms, parse_partition_dir
from storage.log_moves import DELETE_DIR_SUFFIX, FutureLog, LogMoves

logger = logging.getLogger(__name__)


def _default_open_segments() -> int:
    """Segments kept open (up to 3 descriptors each: log, .index, .timeindex) within half of the
    process's descriptor limit (Kafka keeps every segment open; the broker raises the soft limit to
    the hard one at start), at least 1024 when the limit is unknown."""
    try:
        import resource
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, ValueError, OSError):
        return 1024
    if soft == resource.RLIM_INFINITY:
        return 65536
    return max(16, soft // 2 // 3)


class LogManager(LogMoves):
    """Opens every partition log found under `log_dirs` at start-up (recovering
    after an unclean stop), creates new ones in the least loaded dir, and runs
    housekeeping (`tick`): flush.ms, retention, delayed file deletion, checkpoints.
    Logs move between its dirs through future logs (`storage.log_moves`)."""

    def __init__(self, log_dirs, defaults: LogConfig | Mapping[str, Any] | None = None, *,
                 max_open_files: int | None = None, clock: Callable[[], int] = _now_ms):
        self.log_dirs = [os.path.abspath(d) for d in ([log_dirs] if isinstance(log_dirs, str) else log_dirs)]
        if isinstance(defaults, LogConfig):
            self.defaults = defaults
        else:
            self.defaults = LogConfig.from_mapping(defaults)
        self.clock = clock
        self.handles = OpenFiles(max_open_files or _default_open_segments())
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], Log] = {}
        self._dir_of = _LogDirs()
        self._futures: dict[tuple[str, int], FutureLog] = {}   # logs being moved to another dir
        self._preferred_dirs: dict[tuple[str, int], str] = {}  # where a log yet to come goes
        self._topic_overrides: dict[str, dict[str, Any]] = {}
        self._configs: dict[str, tuple[LogConfig, dict[str, Any] | None, LogConfig]] = {}
        self._pending_dir_deletes: list[tuple[int, str]] = []
        self.had_clean_shutdown: dict[str, bool] = {}
        self.offline_dirs: dict[str, str] = {}  # log dir -> the I/O error that took it offline
        self.offline_dir_events = 0   # dirs that went offline since start (a metric)
        self.offline_partitions: set[tuple[str, int]] = set()
        # Called (with offline_dirs) once the last online dir fails: a cluster node halts then, as
        # Kafka's broker does, so that its partitions' leadership moves to a replica that can write.
        self.on_every_dir_offline: Callable[[dict[str, str]], None] | None = None
        # Logs the cleaner failed on (Kafka's KIP-346 uncleanable partitions): skipped
        # until a restart, a config change or the log's deletion.
        self._uncleanable: set[tuple[str, int]] = set()
        self._cleaner_thread: threading.Thread | None = None
        self._cleaner_stop = threading.Event()
        futures: list[tuple[str, str, bool]] = []   # (log dir, future log's dir, clean stop)
        for log_dir in self.log_dirs:
            try:
                os.makedirs(log_dir, exist_ok=True)
                self._load_dir(log_dir, futures)
            except OSError as exc:
                self._dir_failed(log_dir, exc)
        self._adopt_futures([f for f in futures if f[0] not in self.offline_dirs])

    # -- start-up --------------------------------------------------------------------
    def _load_dir(self, log_dir: str, futures: list) -> None:
        marker = os.path.join(log_dir, checkpoints.CLEAN_SHUTDOWN)
        clean = os.path.exists(marker)
        self.had_clean_shutdown[log_dir] = clean
        recovery = checkpoints.read_offsets(os.path.join(log_dir, checkpoints.RECOVERY_POINT))
        starts = checkpoints.read_offsets(os.path.join(log_dir, checkpoints.LOG_START_OFFSET))
        hws = checkpoints.read_offsets(os.path.join(log_dir, checkpoints.HIGH_WATERMARK))
        cleaned = checkpoints.read_offsets(os.path.join(log_dir, checkpoints.CLEANER_OFFSET))
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)  # a deletion interrupted by the stop
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                futures.append((log_dir, path, clean))   # once every current log is known
                continue
            try:
                key = parse_partition_dir(name)
            except ValueError:
                continue
            if key in self._logs and not self._load_duplicate(key, path):
                continue
            log = Log(path, self._config_for(key[0]), handles=self.handles,
                      recovery_point=recovery.get(key, 0), log_start_offset=starts.get(key, 0),
                      high_watermark=hws.get(key, 0), clean_shutdown=clean,
                      cleaner_checkpoint=cleaned.get(key, 0), clock=self.clock)
            log.on_offline = self._log_failed
            self._logs[key] = log
            self._dir_of[key] = log_dir
        if clean:
            os.remove(marker)  # from now on a crash is an unclean stop
        self._write_checkpoints(log_dir)

    def _report_offline(self, log_dir: str, exc: BaseException, where: str) -> None:
        """Once per log dir: the cause at ERROR (as Kafka's LogDirFailureChannel logs it)."""
        if log_dir in self.offline_dirs:
            return
        self.offline_dirs[log_dir] = f"{type(exc).__name__}: {exc}"
        self.offline_dir_events += 1
        logger.error("log dir %s is offline after an I/O error on %s: %s", log_dir, where,
                     self.offline_dirs[log_dir])
        if self.on_every_dir_offline is not None and set(self.log_dirs) <= set(self.offline_dirs):
            self.on_every_dir_offline(dict(self.offline_dirs))

    def _log_failed(self, log, exc: BaseException) -> None:
        """A log's I/O error (disk full, failing disk): its dir is reported offline. Only that
        log stops at once (closing the others from inside a failing append could deadlock); the
        others in the dir fail on their own next write, and no new partition is placed there."""
        log_dir = self._dir_of.get((log.topic, log.partition))
        if log_dir is not None:
            self._report_offline(log_dir, exc, f"{log.topic}-{log.partition}")

    def _dir_failed(self, log_dir: str, exc: BaseException) -> None:
        """Kafka takes a whole log dir offline on an I/O error: its partitions answer
        KAFKA_STORAGE_ERROR and no new partition is placed there."""
        self._report_offline(log_dir, exc, log_dir)
        self.offline_dirs[log_dir] = f"{type(exc).__name__}: {exc}"
        with self._lock:
            for key in [k for k, f in self._futures.items() if f.log_dir == log_dir]:
                self._futures.pop(key).log.close()
            for key in [k for k, d in self._dir_of.items() if d == log_dir]:
                log = self._logs.pop(key)
                del self._dir_of[key]
                self.offline_partitions.add(key)
                try:
                    log.close()
                except OSError:
                    pass
        try:
            for name in os.listdir(log_dir):
                try:
                    self.offline_partitions.add(parse_partition_dir(name))
                except ValueError:
                    pass
        except OSError:
            pass

    # -- configuration ------------------------------------------------------------------
    def _config_for(self, topic: str) -> LogConfig:
        # One (frozen) LogConfig per topic while its overrides and the defaults stay the same:
        # a topic's thousands of partitions share it instead of building one each.
        overrides = self._topic_overrides.get(topic)
        cached = self._configs.get(topic)
        if cached is not None and cached[0] is self.defaults and cached[1] == overrides:
            return cached[2]
        config = LogConfig.from_mapping(overrides, self.defaults)
        self._configs[topic] = (self.defaults, overrides, config)
        return config

    def set_topic_config(self, topic: str, overrides: Mapping[str, Any] | None) -> None:
        """Replace a topic's overrides (Kafka names); live logs pick them up at once."""
        with self._lock:
            self._topic_overrides[topic] = dict(overrides or {})
            self._uncleanable = {k for k in self._uncleanable if k[0] != topic}
            config = self._config_for(topic)
            for (t, _), log in self._logs.items():
                if t == topic:
                    log.update_config(config)

    def set_defaults(self, defaults: LogConfig | Mapping[str, Any]) -> None:
        with self._lock:
            self.defaults = defaults if isinstance(defaults, LogConfig) else LogConfig.from_mapping(defaults, self.defaults)
            self._uncleanable.clear()
            for (topic, _), log in self._logs.items():
                log.update_config(self._config_for(topic))

    # -- logs -------------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int,
                          overrides: Mapping[str, Any] | None = None, *, topic_id: str | None = None) -> Log:
        """The partition's log, created if needed.  With `topic_id` (Kafka's base64
        form), it is recorded in `partition.metadata` and checked against it."""
        log = self._get_or_create(topic, partition, overrides)
        if topic_id is not None:
            log.assign_topic_id(topic_id)
        return log

    def _get_or_create(self, topic: str, partition: int, overrides) -> Log:
        with self._lock:
            if overrides is not None:
                self._topic_overrides[topic] = dict(overrides)
            key = (topic, partition)
            log = self._logs.get(key)
            if log is not None:
                if overrides is not None:
                    log.update_config(self._config_for(topic))
                return log
            if key in self.offline_partitions:
                raise KafkaStorageError(f"{topic}-{partition} is in an offline log dir")
            log_dir = self._preferred_dirs.pop(key, None)
            if log_dir is None or log_dir in self.offline_dirs:
                log_dir = self._least_loaded_dir()
            path = os.path.join(log_dir, f"{topic}-{partition}")
            log = Log(path, self._config_for(topic), handles=self.handles, clock=self.clock)
            log.on_offline = self._log_failed
            self._logs[key] = log
            self._uncleanable.discard(key)
            self._dir_of[key] = log_dir
            return log

    def _least_loaded_dir(self) -> str:
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise KafkaStorageError("every log dir is offline")
        counts = self._dir_of.counts
        return min(online, key=lambda d: counts[d])

    def logs(self) -> dict[tuple[str, int], Log]:
        with self._lock:
            return dict(self._logs)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Forget a partition and rename its dir to `<name>.<id>-delete`; the files go
        after file.delete.delay.ms so in-flight reads finish."""
        detached = self.detach_log(topic, partition)
        if detached is None:
            return False
        self.retire_logs([detached])
        return True

    def detach_log(self, topic: str, partition: int):
        """delete_log()'s first half, cheap enough for an event loop: the partition is forgotten at
        once (a new log of the same name may be created after `retire_logs`). Returns what to pass
        to `retire_logs`, or None if there was no such log."""
        with self._lock:
            key = (topic, partition)
            log = self._logs.pop(key, None)
            log_dir = self._dir_of.pop(key, None)
            self._uncleanable.discard(key)
        self.cancel_move(topic, partition)
        return None if log is None else (log, log_dir)

    def retire_logs(self, detached) -> None:
        """delete_log()'s second half for detached logs: close each, rename its dir for deletion,
        then one fsync per log dir (not per partition: thousands are deleted at once)."""
        dirs, failure = set(), None
        for log, log_dir in detached:
            try:
                log.close()
                target = f"{log.directory}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
                os.replace(log.directory, target)
            except (OSError, StorageError) as exc:   # the others still go; the first failure is raised
                failure = failure or exc
                continue
            dirs.add(log_dir)
            with self._lock:
                self._pending_dir_deletes.append((self.clock() + log.config.file_delete_delay_ms, target))
        for log_dir in dirs:
            checkpoints.fsync_dir(log_dir)
        if failure is not None:
            raise failure

    # -- housekeeping ---------------------------------------------------------------------
    def tick(self, now_ms: int | None = None) -> None:
        """Periodic work; call every few seconds from a worker thread (or the two halves below,
        the first in slices, to spread the work over time)."""
        now = self.clock() if now_ms is None else now_ms
        self.tick_logs(list(self.logs().values()), now)
        self.tick_files(now)

    def tick_logs(self, logs, now_ms: int, retention: bool = True) -> None:
        """Each log's housekeeping: flush.ms, rolled segments, retention (when `retention`: the
        broker checks it every log.retention.check.interval.ms), due files, producers."""
        for log in logs:
            if log.offline is not None:
                continue
            try:
                log.maybe_flush_by_time(now_ms)
                log.flush_rolled_segments()
                if retention:
                    log.apply_retention(now_ms)
                log.delete_due_files(now_ms)
                log.expire_producers(now_ms)
            except Exception:  # one bad log must not stop housekeeping for the others
                if log.offline is None:
                    raise

    def tick_files(self, now_ms: int) -> None:
        """Directories of deleted logs whose delay has passed; the inline cleaner's turn."""
        with self._lock:
            due = [p for t, p in self._pending_dir_deletes if t <= now_ms]
            self._pending_dir_deletes = [(t, p) for t, p in self._pending_dir_deletes if t > now_ms]
        for path in due:
            shutil.rmtree(path, ignore_errors=True)
        if self._cleaner_thread is None:
            self.clean_one(now_ms)

    @property
    def uncleanable_partitions(self) -> set[tuple[str, int]]:
        """(topic, partition) of the logs the cleaner failed on and now skips (KIP-346's
        uncleanable-partitions-count is its length)."""
        with self._lock:
            return set(self._uncleanable)

    def clean_one(self, now_ms: int | None = None):
        """Compact the dirtiest compacted log that is due (one per call, like one cleaner
        thread); returns its CleanerStats or None.  Never raises: a log the cleaner
        fails on is marked uncleanable and the next dirtiest one is cleaned instead."""
        from storage import cleaner
        now = self.clock() if now_ms is None else now_ms
        while True:
            candidate = self._dirtiest_log(now)
            if candidate is None:
                return None
            key, log = candidate
            try:
                return cleaner.clean(log, now)
            except OSError as exc:
                log._go_offline(exc)
            except Exception as exc:  # noqa: BLE001 - undecodable data, a bug: skip this log
                self._mark_uncleanable(key, log, exc)

    def _dirtiest_log(self, now: int):
        from storage import cleaner
        best, best_ratio = None, -1.0
        with self._lock:
            # (not a log being moved: its copy takes batches as they are)
            candidates = [(k, log) for k, log in self._logs.items()
                          if k not in self._uncleanable and k not in self._futures]
        for key, log in candidates:
            try:
                if not cleaner.needs_cleaning(log, now):
                    continue
                _, _, clean_bytes, dirty_bytes, _ = cleaner.dirty_section(log, now)
            except OSError as exc:
                log._go_offline(exc)
                continue
            except Exception as exc:  # noqa: BLE001
                self._mark_uncleanable(key, log, exc)
                continue
            ratio = dirty_bytes / max(1, clean_bytes + dirty_bytes)
            if ratio > best_ratio:
                best, best_ratio = (key, log), ratio
        return best

    def _mark_uncleanable(self, key: tuple[str, int], log: Log, exc: BaseException) -> None:
        with self._lock:
            if self._logs.get(key) is not log:
                return  # deleted or replaced while being cleaned: nothing to remember
            self._uncleanable.add(key)
        logger.error("log cleaner failed on %s-%d; the partition is uncleanable until a restart "
                     "or a config change", key[0], key[1], exc_info=exc)

    def start_cleaner(self, interval_s: float = 15.0) -> None:
        """Compact in a background thread of its own (Kafka's log cleaner thread), so a
        long pass never delays tick(); without it, tick() runs one pass per call."""
        if self._cleaner_thread is not None:
            return

        def run():
            while not self._cleaner_stop.wait(interval_s):
                while self.clean_one() is not None and not self._cleaner_stop.is_set():
                    pass

        self._cleaner_thread = threading.Thread(target=run, name="log-cleaner", daemon=True)
        self._cleaner_thread.start()

    def stop_cleaner(self) -> None:
        thread, self._cleaner_thread = self._cleaner_thread, None
        if thread is not None:
            self._cleaner_stop.set()
            thread.join(timeout=60)
            self._cleaner_stop.clear()

    def checkpoint(self) -> None:
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                continue
            try:
                self._write_checkpoints(log_dir)
            except OSError as exc:
                self._dir_failed(log_dir, exc)

    def _write_checkpoints(self, log_dir: str) -> None:
        with self._lock:
            mine = [(k, log) for k, log in self._logs.items() if self._dir_of.get(k) == log_dir]
        checkpoints.write_offsets(os.path.join(log_dir, checkpoints.RECOVERY_POINT),
                                  {k: log.recovery_point for k, log in mine})
        checkpoints.write_offsets(os.path.join(log_dir, checkpoints.LOG_START_OFFSET),
                                  {k: log.log_start_offset for k, log in mine})
        checkpoints.write_offsets(os.path.join(log_dir, checkpoints.HIGH_WATERMARK),
                                  {k: log.high_watermark for k, log in mine})
        checkpoints.write_offsets(os.path.join(log_dir, checkpoints.CLEANER_OFFSET),
                                  {k: log.cleaner_checkpoint for k, log in mine if log.config.compact})

    def close(self) -> None:
        """Clean shutdown: flush everything, write checkpoints and the clean marker."""
        self.stop_cleaner()
        with self._lock:
            clean = {d: True for d in self.log_dirs}
            for future in self._futures.values():   # resumed at the next start
                try:
                    future.log.close_clean(sync=False)
                except (OSError, StorageError):
                    clean[future.log_dir] = False
            # Snapshots without fsync, then one syncfs per log dir instead of a handful
            # of fsyncs per partition; logs in a dir where syncfs fails flush one by one.
            for key, log in self._logs.items():
                try:
                    if log.offline is None:
                        log.close_clean(sync=False)
                except (OSError, StorageError):
                    clean[self._dir_of[key]] = False
            synced = {d for d in self.log_dirs
                      if d not in self.offline_dirs and checkpoints.sync_filesystem(d)}
            for key, log in self._logs.items():
                try:
                    if log.offline is not None:
                        clean[self._dir_of[key]] = False
                    elif self._dir_of[key] in synced:
                        log.mark_flushed()
                    else:
                        log.flush()
                        log.close_clean()
                except (OSError, StorageError):
                    clean[self._dir_of[key]] = False
            for log_dir in self.log_dirs:
                if log_dir in self.offline_dirs:
                    continue
                try:
                    self._write_checkpoints(log_dir)
                    if clean[log_dir]:
                        checkpoints.write_atomically(os.path.join(log_dir, checkpoints.CLEAN_SHUTDOWN), "")
                except OSError:
                    pass  # no clean marker: the next start recovers this dir
            for log in [*self._logs.values(), *(f.log for f in self._futures.values())]:
                log.close()
            self._logs.clear()
            self._futures.clear()


class _LogDirs(dict):
    """(topic, partition) -> its log dir, with the number of logs per dir kept up to date: placing
    a new log costs O(dirs), not a count over every log (quadratic when creating thousands)."""

    def __init__(self):
        super().__init__()
        self.counts: collections.Counter = collections.Counter()

    def __setitem__(self, key, log_dir):
        previous = self.get(key)
        if previous is not None:
            self.counts[previous] -= 1
        super().__setitem__(key, log_dir)
        self.counts[log_dir] += 1

    def __delitem__(self, key):
        self.counts[self[key]] -= 1
        super().__delitem__(key)

    def pop(self, key, *default):
        if key in self:
            self.counts[self[key]] -= 1
        return super().pop(key, *default)
