"""Moving replicas between this broker's log dirs (AlterReplicaLogDirs, KIP-113): the broker side.

`storage.log_moves` builds the copy (a future log) and swaps it in; this module drives it. One
task per moving partition copies in worker threads, paced by the dynamic broker config
`replica.alter.log.dirs.io.max.bytes.per.second`, then swaps the copy in and points the partition
(Produce, Fetch, the follower fetcher) at the new log while the old one's lock is held. Moves found
on disk at start-up resume once their partition is served here again.

Kafka 3.9 with JBOD also tells its controller the replica's new directory id (AssignReplicasToDirs,
key 73) and registers its log dirs' ids; Odradek's controller does not track directories, so a move
stays this broker's own business.
"""

from __future__ import annotations

import logging
import os

import trio

from protocol import ErrorCode

from storage.errors import StorageError
from storage.log_moves import COPY_CHUNK_BYTES, future_dir_name

log = logging.getLogger("odradek.log_dir_moves")

THROTTLE_CONFIG = "replica.alter.log.dirs.io.max.bytes.per.second"
UNSERVED_RETRY_S = 0.5   # a move resumed at start-up waits for its partition this long per look
MAX_DIR_NAME = 255


def append_following_moves(partition, records, **options):
    """`partition.log.append(records, **options)`, made again on the new log when the partition
    moved to another log dir while the append waited for the old log's lock (it is retired then)."""
    log_ = partition.log
    try:
        return log_.append(records, **options)
    except StorageError:
        if partition.log is log_:
            raise
        return partition.log.append(records, **options)


class LogDirMoves:
    def __init__(self, broker, partitions):
        self.broker = broker
        self.partitions = partitions
        self._running: set[tuple[str, int]] = set()
        self._nursery: trio.Nursery | None = None

    @property
    def logs(self):
        return self.broker.logs

    def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        for key in self.logs.future_logs():
            self._ensure_task(key)

    # ------------------------------------------------------------------------------ requests
    def alter(self, topic: str, index: int, log_dir: str) -> int:
        """One partition of an AlterReplicaLogDirs request: Kafka's error code for it."""
        if len(future_dir_name(topic, index)) > MAX_DIR_NAME:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        if log_dir not in self.logs.log_dirs:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if log_dir in self.logs.offline_dirs or (topic, index) in self.logs.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.partitions.get(topic, index) is None:
            self.logs.prefer_dir(topic, index, log_dir)   # for a replica yet to come, as Kafka
            topic_image = self.broker.image.topics.get(topic)
            if topic_image is None or index not in topic_image.partitions:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return ErrorCode.REPLICA_NOT_AVAILABLE   # (Kafka's answer when not a replica here)
        try:
            moving = self.logs.start_move(topic, index, log_dir)
        except StorageError as exc:
            return exc.error_code
        if moving:
            self._ensure_task((topic, index))
        return ErrorCode.NONE

    def describe(self) -> dict[str, list[tuple[str, int, int, int, bool]]]:
        """Per log dir: (topic, partition, size, offset lag, is future) of the replicas served
        here and of the copies being made (a worker thread: sizes sum segment files)."""
        by_dir: dict[str, list] = {}
        for partition in self.partitions.all():
            log_dir = self.logs.dir_of(partition.topic, partition.index)
            if log_dir is not None:
                by_dir.setdefault(log_dir, []).append(
                    (partition.topic, partition.index, partition.log.size_bytes,
                     max(0, partition.log.high_watermark - partition.log.log_end_offset), False))
        for (topic, index), future in self.logs.future_logs().items():
            current = self.logs.get_log(topic, index)
            if current is not None:
                by_dir.setdefault(future.log_dir, []).append(
                    (topic, index, future.log.size_bytes, future.offset_lag(current), True))
        return by_dir

    # ------------------------------------------------------------------------------- copying
    def _ensure_task(self, key: tuple[str, int]) -> None:
        if key not in self._running and self._nursery is not None:
            self._running.add(key)
            self._nursery.start_soon(self._move, key)

    async def _move(self, key: tuple[str, int]) -> None:
        topic, index = key
        try:
            while True:
                if self.partitions.get(topic, index) is None:   # not (yet) served here
                    if key not in self.logs.future_logs():
                        return
                    await trio.sleep(UNSERVED_RETRY_S)
                    continue
                rate = self.broker.config[THROTTLE_CONFIG]
                chunk = COPY_CHUNK_BYTES if rate <= 0 else max(4096, min(COPY_CHUNK_BYTES, rate // 10))
                copied = await self.broker.run_blocking(self.logs.copy_to_future, topic, index, chunk)
                if copied < 0:
                    return    # cancelled (moved elsewhere, or the partition deleted)
                if copied == 0:
                    # caught up: what came in since is copied with appends held back
                    await self._finish(key)
                    return
                if rate > 0:
                    await trio.sleep(copied / rate)
        except (StorageError, OSError) as exc:
            log.error("moving %s-%d to another log dir failed: %s; the replica stays where it "
                      "is", topic, index, exc)
            await self.broker.run_blocking(self.logs.cancel_move, topic, index)
        finally:
            self._running.discard(key)

    async def _finish(self, key: tuple[str, int]) -> None:
        def point_partition_at(new_log) -> None:
            # runs in the worker thread, under the old log's lock: no append can slip in between
            partition = self.partitions.get(*key)
            if partition is not None:
                partition.log = new_log

        new = await self.broker.run_blocking(self.logs.finish_move, *key, point_partition_at)
        partition = self.partitions.get(*key)
        if new is not None and partition is not None:
            partition.wake()   # long polls re-read from the new log
            log.info("%s-%d now lives in %s", key[0], key[1], os.path.dirname(new.directory))
