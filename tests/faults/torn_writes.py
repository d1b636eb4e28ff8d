"""What a power loss leaves at the end of a stopped node's partition logs: a torn last write.

`tear_tails(data_dir, rng)` damages the active (last) segment of every partition in a node's log dir
(the metadata log excepted) one way or another, picked per segment:

- ``cut``: the file ends inside its last batch (the write reached the disk only in part);
- ``garbage``: random bytes after the last batch (a write whose length reached the disk, but not
  its data, or blocks of another file);
- ``zeros``: zero bytes after the last batch (a file extended before its data was written).

A broker must recover as Kafka does: truncate at the last whole, valid batch, rebuild its indexes,
and fetch the rest from the leader. Works on Odradek's and Kafka's log dirs (the same layout).
"""

from __future__ import annotations

import glob
import os
import random

from protocol.records import RecordBatchError, iter_batches

VARIANTS = ("cut", "garbage", "zeros")
# the metadata log: Odradek's `metadata/`, Kafka's `__cluster_metadata-0`
METADATA_DIRS = ("metadata", "__cluster_metadata-0")


def tear_tails(data_dir: str, rng: random.Random) -> dict[str, int]:
    """Damage every partition's active segment under `data_dir` (the node must be stopped); how
    many segments each variant damaged."""
    done = dict.fromkeys(VARIANTS, 0)
    for partition_dir in sorted(glob.glob(os.path.join(glob.escape(data_dir), "*-*"))):
        name = os.path.basename(partition_dir)
        if name in METADATA_DIRS or not name.rsplit("-", 1)[1].isdigit():
            continue
        segments = sorted(glob.glob(os.path.join(glob.escape(partition_dir), "*.log")))
        if not segments:
            continue
        variant = rng.choice(VARIANTS)
        if tear(segments[-1], variant, rng):
            done[variant] += 1
    return done


def tear(segment: str, variant: str, rng: random.Random) -> bool:
    """Damage one segment file's tail; False when it holds no whole batch to tear."""
    with open(segment, "rb") as handle:
        data = handle.read()
    last = _last_batch(data)
    if last is None:
        return False
    start, end = last
    if variant == "cut":
        with open(segment, "r+b") as handle:
            handle.truncate(rng.randrange(start + 1, end))
        return True
    size = rng.randint(1, 4096)
    tail = rng.randbytes(size) if variant == "garbage" else bytes(size)
    with open(segment, "ab") as handle:
        handle.write(tail)
    return True


def _last_batch(data: bytes) -> tuple[int, int] | None:
    """(start, end) of the last whole batch in a segment's bytes (None when there is none)."""
    last = None
    try:
        for batch in iter_batches(data):
            last = (batch.pos, batch.pos + batch.size)
    except RecordBatchError:
        pass        # already torn: what came before it counts
    return last
