"""Who wrote each record of a trial's topic: the producer id and epoch of every offset, read from
the nodes' segment files after the trial (the clients' reader cannot see them).

The checker needs them to tell a broker that appended one idempotent batch twice (same producer id
and epoch: the broker's deduplication failed) from a client that sent a record again in a new
producer epoch (each epoch is a fresh idempotence session: no broker can deduplicate across them).
Kafka's segment files have the same layout, so this reads a Kafka node's log dirs too.
"""

from __future__ import annotations

import glob
import os

from protocol.records import RecordBatchError, iter_batches


def producer_sessions(data_dirs, topic: str) -> dict[tuple[int, int], tuple[int, int]]:
    """(partition, offset) -> (producer id, producer epoch) over `topic`'s partitions; each
    partition from the node whose log of it reaches furthest (below the high watermark every
    in-sync copy is the same)."""
    longest: dict[int, dict[tuple[int, int], tuple[int, int]]] = {}
    for data_dir in data_dirs:
        for partition_dir in glob.glob(os.path.join(glob.escape(data_dir), f"{glob.escape(topic)}-*")):
            index = partition_dir.rsplit("-", 1)[1]
            if not index.isdigit():
                continue
            sessions = _partition_sessions(partition_dir, int(index))
            if len(sessions) > len(longest.get(int(index), ())):
                longest[int(index)] = sessions
    return {key: value for sessions in longest.values() for key, value in sessions.items()}


def _partition_sessions(partition_dir: str, partition: int) -> dict[tuple[int, int], tuple[int, int]]:
    sessions = {}
    for segment in sorted(glob.glob(os.path.join(glob.escape(partition_dir), "*.log"))):
        with open(segment, "rb") as handle:
            data = handle.read()
        try:
            for batch in iter_batches(data):
                for offset in range(batch.base_offset, batch.last_offset + 1):
                    sessions[(partition, offset)] = (batch.producer_id, batch.producer_epoch)
        except RecordBatchError:
            pass     # a torn tail (killed mid-write, not yet recovered): what came before counts
    return sessions


def replica_divergence(data_dirs, topic: str) -> dict[int, int]:
    """partition -> the first offset at which two nodes' copies of it hold different batches, for
    each of `topic`'s partitions whose copies disagree. Only the offsets every copy has count (a
    follower may still be a fetch behind); a batch is the same when its offsets and CRC are (the
    CRC covers everything but the leader epoch and offset fields). A node that kept records its
    leader truncated away, or lost some it had acknowledged, shows up here even when the reader,
    reading only the leader, sees nothing wrong."""
    copies: dict[int, list[list[tuple[int, int, int]]]] = {}
    for data_dir in data_dirs:
        for index, partition_dir in _partition_dirs(data_dir, topic):
            copies.setdefault(index, []).append(_batches(partition_dir))
    diverged = {}
    for index, logs in copies.items():
        common_end = min((log[-1][1] + 1 if log else 0) for log in logs)
        prefixes = [[batch for batch in log if batch[1] < common_end] for log in logs]
        for batches in zip(*prefixes):
            if len(set(batches)) > 1:
                diverged[index] = min(batch[0] for batch in batches)
                break
    return diverged


def _partition_dirs(data_dir: str, topic: str):
    """(partition, directory) of each of `topic`'s partitions in a node's data dir (not those of a
    topic whose name merely starts with `topic` and a dash, nor deleted ones)."""
    prefix = topic + "-"
    for name in os.listdir(data_dir) if os.path.isdir(data_dir) else ():
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            yield int(name[len(prefix):]), os.path.join(data_dir, name)


def _batches(partition_dir: str) -> list[tuple[int, int, int]]:
    """(base offset, last offset, CRC) of every whole batch in a partition's segments, in order."""
    batches = []
    for segment in sorted(glob.glob(os.path.join(glob.escape(partition_dir), "*.log"))):
        with open(segment, "rb") as handle:
            data = handle.read()
        try:
            for batch in iter_batches(data):
                batches.append((batch.base_offset, batch.last_offset, batch.crc))
        except RecordBatchError:
            pass     # a torn tail (killed mid-write, not yet recovered)
    return batches
