"""Where a share-partition's state is kept (Kafka's DefaultStatePersister): at the share coordinator of
its key, the leader of the key's `__share_group_state` partition. When that is this broker the store
is called directly; otherwise the Read/Initialize/WriteShareGroupState RPCs go to that broker. Remote
writes are queued and sent by `flush()`, which a request awaits before it answers (and the lock timer
spawns), so an acknowledgement is answered only once its state is stored.
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

import trio

from protocol import ErrorCode, messages

from broker.coordinator.ownership import SHARE_STATE_TOPIC

from .glue import state_partition
from .partition import StateBatch
from .state_store import Key, ShareState, coordinator_key

log = logging.getLogger("odradek.share")
E = ErrorCode
_RPC_TIMEOUT_S = 10.0


class Persister:
    def __init__(self, service):
        self.service = service
        self._dirty: dict[Key, tuple] = {}          # remote writes not sent yet: key -> write arguments
        self._flush_lock = trio.Lock()
        self._fenced: set[Key] = set()              # remote writes refused for a newer state epoch

    def route(self, key: Key) -> tuple[Optional[int], ErrorCode]:
        """(None, NONE) when this broker is the key's share coordinator, (node id, NONE) for another
        broker, (None, error) when there is none usable right now."""
        service = self.service
        index = state_partition(service, coordinator_key(key))
        part = service.broker.image.partition(SHARE_STATE_TOPIC, index)
        if part is None or part.leader < 0:
            return None, E.COORDINATOR_NOT_AVAILABLE
        if part.leader == service.broker.node_id:
            return None, service.coordinator_error(SHARE_STATE_TOPIC, index)
        return part.leader, E.NONE

    async def read_or_initialize(self, key: Key, initial_start: Callable[[], int]) -> ShareState | ErrorCode:
        node, code = self.route(key)
        if code is not E.NONE:
            return code
        store = self.service.share_states
        if node is None:
            state = store.read(key)
            if state is not None and state.start_offset >= 0:
                return state
            start = initial_start()
            code = store.initialize(key, 0, start)
            return ShareState(0, -1, start, []) if code is E.NONE else code
        try:
            return await self._remote_read_or_initialize(node, key, initial_start)
        except Exception as exc:
            log.info("share coordinator %d unreachable for %s: %s", node, key, exc)
            return E.COORDINATOR_NOT_AVAILABLE

    async def _remote_read_or_initialize(self, node: int, key: Key, initial_start) -> ShareState | ErrorCode:
        peer = self.service.peer_client()
        group_id, topic_id, partition = key
        R = messages.ReadShareGroupStateRequest
        answer = await peer.request(node, 84, 0, R(group_id=group_id, topics=[R.ReadStateData(
            topic_id=topic_id, partitions=[R.PartitionData(partition=partition, leader_epoch=0)])]),
            timeout=_RPC_TIMEOUT_S)
        result = answer.results[0].partitions[0]
        if result.error_code:
            return ErrorCode(result.error_code)
        if result.start_offset >= 0:
            return ShareState(result.state_epoch, -1, result.start_offset, [
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in result.state_batches])
        start = initial_start()
        I = messages.InitializeShareGroupStateRequest
        answer = await peer.request(node, 83, 0, I(group_id=group_id, topics=[I.InitializeStateData(
            topic_id=topic_id, partitions=[I.PartitionData(partition=partition, state_epoch=0, start_offset=start)])]),
            timeout=_RPC_TIMEOUT_S)
        code = ErrorCode(answer.results[0].partitions[0].error_code)
        return ShareState(0, -1, start, []) if code is E.NONE else code

    async def read_summary(self, key: Key) -> tuple[ErrorCode, int, int, int]:
        """(error, start offset (-1: none yet), leader epoch, records done in the in-flight window)."""
        node, code = self.route(key)
        if code is not E.NONE:
            return code, -1, -1, 0
        if node is None:
            state = self.service.share_states.read(key)
            if state is None:
                return E.NONE, -1, -1, 0
            done = sum(b.last_offset - b.first_offset + 1 for b in state.batches if b.delivery_state in (2, 4))
            return E.NONE, state.start_offset, state.leader_epoch, done
        group_id, topic_id, partition = key
        S = messages.ReadShareGroupStateSummaryRequest
        try:
            answer = await self.service.peer_client().request(node, 87, 1, S(group_id=group_id, topics=[
                S.ReadStateSummaryData(topic_id=topic_id, partitions=[S.PartitionData(partition=partition, leader_epoch=0)])]),
                timeout=_RPC_TIMEOUT_S)
        except Exception as exc:
            log.info("share coordinator %d unreachable for %s: %s", node, key, exc)
            return E.COORDINATOR_NOT_AVAILABLE, -1, -1, 0
        result = answer.results[0].partitions[0]
        return ErrorCode(result.error_code), result.start_offset, result.leader_epoch, max(result.delivery_complete_count, 0)

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> ErrorCode:
        """Set the share-partition's state afresh at `start_offset` (AlterShareGroupOffsets): no records in
        flight; a leader still holding the old state is fenced by the higher state epoch."""
        node, code = self.route(key)
        if code is not E.NONE:
            return code
        if node is None:
            return self.service.share_states.initialize(key, state_epoch, start_offset)
        group_id, topic_id, partition = key
        I = messages.InitializeShareGroupStateRequest
        body = I(group_id=group_id, topics=[I.InitializeStateData(topic_id=topic_id, partitions=[
            I.PartitionData(partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])
        return await self._remote_code(node, 83, body, key)

    async def delete(self, keys: list[Key]) -> ErrorCode:
        """Delete the share-partitions' state (DeleteGroups, DeleteShareGroupOffsets), each at its share
        coordinator: this broker's store, or one DeleteShareGroupState per other coordinator."""
        if SHARE_STATE_TOPIC not in self.service.broker.image.topics:
            return E.NONE                   # no share coordinator ever held any state
        by_node: dict[int, list[Key]] = {}
        first_error = E.NONE
        for key in keys:
            node, code = self.route(key)
            if code is E.NONE and node is None:
                code = self.service.share_states.delete(key)
            elif code is E.NONE:
                by_node.setdefault(node, []).append(key)
            if code is not E.NONE and first_error is E.NONE:
                first_error = code
        D = messages.DeleteShareGroupStateRequest
        for node, node_keys in by_node.items():
            for group_id in {k[0] for k in node_keys}:
                topics: dict = {}
                for _, topic_id, partition in (k for k in node_keys if k[0] == group_id):
                    topics.setdefault(topic_id, []).append(D.PartitionData(partition=partition))
                body = D(group_id=group_id, topics=[D.DeleteStateData(topic_id=t, partitions=parts)
                                                    for t, parts in topics.items()])
                code = await self._remote_code(node, 86, body, (group_id, None, -1))
                if code is not E.NONE and first_error is E.NONE:
                    first_error = code
        return first_error

    async def _remote_code(self, node: int, api_key: int, body, what) -> ErrorCode:
        """Send a share-state request to share coordinator `node`; its first error, or NONE."""
        try:
            answer = await self.service.peer_client().request(node, api_key, 0, body, timeout=_RPC_TIMEOUT_S)
        except Exception as exc:
            log.info("share coordinator %d unreachable for %s: %s", node, what, exc)
            return E.COORDINATOR_NOT_AVAILABLE
        codes = [p.error_code for r in answer.results for p in r.partitions if p.error_code]
        return ErrorCode(codes[0]) if codes else E.NONE

    def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int, batches) -> ErrorCode:
        node, code = self.route(key)
        if code is not E.NONE:
            return code
        if node is None:
            return self.service.share_states.write(key, state_epoch, leader_epoch, start_offset, batches)
        self._dirty[key] = (node, state_epoch, leader_epoch, start_offset, list(batches))
        return E.NONE

    async def drain(self) -> None:
        """Until no remote write of this broker is queued or on its way."""
        async with self._flush_lock:
            pass
        if self._dirty:
            await self.flush()

    def take_fenced(self) -> set[Key]:
        fenced, self._fenced = self._fenced, set()
        return fenced

    def has_pending(self) -> bool:
        return bool(self._dirty)

    async def flush(self) -> ErrorCode:
        """Send the queued remote writes (the newest state per key); the first error, or NONE."""
        first_error = E.NONE
        async with self._flush_lock:
            dirty, self._dirty = self._dirty, {}
            W = messages.WriteShareGroupStateRequest
            for key, (node, state_epoch, leader_epoch, start_offset, batches) in dirty.items():
                group_id, topic_id, partition = key
                body = W(group_id=group_id, topics=[W.WriteStateData(topic_id=topic_id, partitions=[W.PartitionData(
                    partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
                    state_batches=[W.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                   for b in batches])])])
                try:
                    answer = await self.service.peer_client().request(node, 85, 0, body, timeout=_RPC_TIMEOUT_S)
                    code = ErrorCode(answer.results[0].partitions[0].error_code)
                except Exception as exc:
                    log.info("writing %s to share coordinator %d failed: %s", key, node, exc)
                    code = E.COORDINATOR_NOT_AVAILABLE
                if code is E.FENCED_STATE_EPOCH:
                    self._fenced.add(key)
                elif code is not E.NONE:
                    self._dirty.setdefault(key, (node, state_epoch, leader_epoch, start_offset, batches))
                    if first_error is E.NONE:
                        first_error = code
        return first_error
