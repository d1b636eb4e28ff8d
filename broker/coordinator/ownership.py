"""Which `__consumer_offsets` / `__transaction_state` / `__share_group_state` partitions this broker
coordinates.

The coordinator of a group (a transactional id) is the leader of its internal-topic partition, so
coordination follows partition leadership in the metadata image, one partition at a time:

- becoming leader (or leader again at a new leader epoch while still loading) → LOADING: the partition's
  log is read and replayed into the cores; requests for its keys get COORDINATOR_LOAD_IN_PROGRESS;
  then ACTIVE (the leader epoch it was loaded at is the transaction coordinator epoch);
- a new leader epoch while ACTIVE and still leader: the log here is still the leader's log, so the
  state stays and only the epoch moves;
- losing leadership (or the topic) → the partition's groups / transactions are unloaded at once;
  requests for them get NOT_COORDINATOR and nothing more is written for them.

`plan(image, owned, node_id)` is the pure diff between the image and what is owned; the service acts on it.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

import trio

from protocol.records import ControlType, parse_control_record

log = logging.getLogger("odradek.coordinator")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"       # the share coordinator's (KIP-932)
INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_TOPIC, SHARE_STATE_TOPIC)


class LoadState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass(eq=False)
class Owned:
    topic: str
    index: int
    epoch: int                      # leader epoch of the partition when it was (re)loaded / last moved
    state: LoadState = LoadState.LOADING
    done: trio.Event = field(default_factory=trio.Event)   # set once loaded (or abandoned)
    # (producer id, commit) of transaction markers appended while loading: the log read may predate them
    markers_while_loading: list = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    load: tuple[tuple[str, int, int], ...] = ()      # (topic, index, leader epoch)
    unload: tuple[tuple[str, int], ...] = ()
    new_epoch: tuple[tuple[str, int, int], ...] = ()  # ACTIVE partitions whose leader epoch moved


def plan(image, owned: dict, node_id: int) -> Plan:
    """What to load, unload and re-epoch so that `owned` matches the partitions `node_id` leads."""
    load, unload, new_epoch = [], [], []
    for topic in INTERNAL_TOPICS:
        topic_image = image.topics.get(topic)
        leading = {} if topic_image is None else {
            index: p.leader_epoch for index, p in topic_image.partitions.items() if p.leader == node_id}
        for key in [k for k in owned if k[0] == topic]:
            if key[1] not in leading:
                unload.append(key)
        for index, epoch in sorted(leading.items()):
            current = owned.get((topic, index))
            if current is None:
                load.append((topic, index, epoch))
            elif current.epoch != epoch:
                if current.state is LoadState.ACTIVE:
                    new_epoch.append((topic, index, epoch))
                else:                       # restart a load that began under an older epoch
                    unload.append((topic, index))
                    load.append((topic, index, epoch))
    return Plan(tuple(load), tuple(unload), tuple(new_epoch))


def read_internal_log(log_) -> list[dict]:
    """Every batch of an internal partition, decoded (runs in a worker thread)."""
    out = []
    for batch in log_.read_batches(log_.log_start_offset):
        entry = {"producer_id": batch.producer_id, "transactional": batch.is_transactional,
                 "control": None, "records": []}
        try:
            records = list(batch.records())
        except Exception as exc:  # a batch we cannot decode: skip it, keep the rest
            log.warning("skipping an unreadable internal batch: %s", exc)
            continue
        if batch.is_control:
            if records:
                try:
                    entry["control"] = parse_control_record(records[0]).type
                except Exception:
                    continue
        else:
            entry["records"] = [(r.key, r.value) for r in records if r.key is not None]
        out.append(entry)
    return out


def is_commit(control_type) -> bool:
    return control_type == ControlType.COMMIT
