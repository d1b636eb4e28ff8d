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
