"""The share coordinator's core (Kafka's ShareCoordinatorShard), without I/O: share-partition state
kept in `__share_group_state`, so a share group's progress survives a restart.

Each share-partition (group id, topic id, partition) is one key; its state is the SPSO, the state
epoch, the leader epoch of the writer and the in-flight state batches. Initialize, Read, Write and
Delete (the four ShareGroupState RPCs) act on it; every change is a `ShareSnapshot` record (the whole
state: Kafka writes `ShareUpdate` deltas between snapshots, replay understands both) appended through
`log.append(coordinator_key, key, value)` and applied only then. Writes from a stale state epoch or
leader epoch are refused with FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH, as Kafka's.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Optional

from protocol import ErrorCode
from protocol.generated.internal import ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey

from broker.coordinator.group_offsets import append_error

from .partition import StateBatch

E = ErrorCode
Key = tuple[str, uuid.UUID, int]       # (group id, topic id, partition)


def coordinator_key(key: Key) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: what picks the `__share_group_state` partition."""
    group_id, topic_id, partition = key
    return f"{group_id}:{_kafka_uuid(topic_id)}:{partition}"


def _kafka_uuid(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


@dataclass
class ShareState:
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    batches: list[StateBatch] = field(default_factory=list)
    snapshot_epoch: int = 0


class ShareStateStore:
    def __init__(self, log):
        self.log = log
        self.states: dict[Key, ShareState] = {}

    # ---- the RPCs' semantics --------------------------------------------------------------------------
    def read(self, key: Key) -> Optional[ShareState]:
        return self.states.get(key)

    def initialize(self, key: Key, state_epoch: int, start_offset: int) -> ErrorCode:
        current = self.states.get(key)
        if current is not None and state_epoch < current.state_epoch:
            return E.FENCED_STATE_EPOCH
        return self._put(key, ShareState(state_epoch, -1, start_offset, [],
                                         0 if current is None else current.snapshot_epoch + 1))

    def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: Iterable[StateBatch]) -> ErrorCode:
        current = self.states.get(key)
        if current is not None:
            if state_epoch < current.state_epoch:
                return E.FENCED_STATE_EPOCH
            if leader_epoch < current.leader_epoch:
                return E.FENCED_LEADER_EPOCH
        snapshot_epoch = 0 if current is None else current.snapshot_epoch + 1
        return self._put(key, ShareState(state_epoch, leader_epoch, start_offset, list(batches), snapshot_epoch))

    def delete(self, key: Key) -> ErrorCode:
        if key not in self.states:
            return E.NONE
        try:
            self.log.append(coordinator_key(key), _snapshot_key(key), None)
        except Exception as exc:
            return append_error(exc)
        self.states.pop(key, None)
        return E.NONE

    # ---- replay ---------------------------------------------------------------------------------------
    def replay(self, key_body, value) -> None:
        key = (key_body.group_id, key_body.topic_id, key_body.partition)
        if value is None:
            self.states.pop(key, None)
            return
        batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                   for b in value.state_batches]
        if isinstance(key_body, ShareUpdateKey):
            current = self.states.get(key)
            if current is None:
                return                      # an update without its snapshot: nothing to apply it to
            current.start_offset = value.start_offset if value.start_offset >= 0 else current.start_offset
            current.leader_epoch = value.leader_epoch
            current.batches = _merge(current.batches, batches, current.start_offset)
            return
        self.states[key] = ShareState(value.state_epoch, value.leader_epoch, value.start_offset, batches,
                                      value.snapshot_epoch)

    def forget(self, keys: Iterable[Key]) -> None:
        for key in list(keys):
            self.states.pop(key, None)

    # ---- inside ----------------------------------------------------------------------------------------
    def _put(self, key: Key, state: ShareState) -> ErrorCode:
        value = ShareSnapshotValue(
            snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset, state_batches=[
                ShareSnapshotValue.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                              delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                for b in state.batches])
        try:
            self.log.append(coordinator_key(key), _snapshot_key(key), value)
        except Exception as exc:
            return append_error(exc)
        self.states[key] = state
        return E.NONE


def _snapshot_key(key: Key) -> ShareSnapshotKey:
    return ShareSnapshotKey(group_id=key[0], topic_id=key[1], partition=key[2])


def _merge(old: list[StateBatch], new: list[StateBatch], start_offset: int) -> list[StateBatch]:
    """A ShareUpdate's batches replace the old ones where they overlap (offset by offset)."""
    per_offset = {}
    for batch in old + new:
        for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
            per_offset[offset] = (batch.delivery_state, batch.delivery_count)
    out: list[StateBatch] = []
    for offset in sorted(per_offset):
        state, count = per_offset[offset]
        last = out[-1] if out else None
        if last and last.last_offset == offset - 1 and (last.delivery_state, last.delivery_count) == (state, count):
            out[-1] = StateBatch(last.first_offset, offset, state, count)
        else:
            out.append(StateBatch(offset, offset, state, count))
    return out
