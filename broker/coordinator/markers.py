"""Transaction markers: writing them into partition logs, and sending them there from the coordinator.

Broker side — `append_markers(broker, markers)`: what WriteTxnMarkers does on a partition leader (and
what the coordinator does for partitions it leads itself): append a COMMIT/ABORT control batch carrying
the coordinator epoch to each partition, with acks=all, then complete transactional offset commits in
`__consumer_offsets` partitions. Per partition, Kafka's errors: UNKNOWN_TOPIC_OR_PARTITION (no replica
here), NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, storage's INVALID_PRODUCER_EPOCH /
TRANSACTION_COORDINATOR_FENCED / KAFKA_STORAGE_ERROR.

Coordinator side — `MarkerSender(service)`, the transaction core's `MarkerWriter`: groups a decided
transaction's partitions by their current leader (from the metadata image), writes locally or sends one
WriteTxnMarkers per destination broker, retries what failed for a retriable reason (NOT_LEADER_OR_FOLLOWER
and the like: the next round asks the image again), drops partitions whose topic is gone, stops on fencing,
and reports the transaction done — so it becomes CompleteCommit / CompleteAbort — only when every marker
is written, and only while this broker still coordinates the transactional id.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import trio

from protocol import ErrorCode, messages
from protocol.records import ControlType, build_control_batch

from broker.partitions import PartitionError
from storage.errors import StorageError

from .ownership import OFFSETS_TOPIC

log = logging.getLogger("odradek.coordinator.markers")
E = ErrorCode
WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1

# Answers after which a marker is not worth resending (Kafka drops the partition from the transaction).
_GIVE_UP = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})
# The producer or the coordinator moved on: this coordinator must stop writing for the transaction.
_FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED, E.TRANSACTION_COORDINATOR_FENCED})


@dataclass(frozen=True)
class Marker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]


# ---- broker side --------------------------------------------------------------------------------------
async def append_markers(broker, markers: list[Marker], *, now_ms: int) -> list[dict[tuple[str, int], ErrorCode]]:
    """Append each marker's control batch to its partitions (acks=all); per marker, {partition: error}."""
    from storage.log import AppendOrigin

    partitions = broker.partitions
    results: list[dict] = []
    appends, owners = [], []            # (partition, batch), (marker index, key)
    for i, marker in enumerate(markers):
        result = {}
        results.append(result)
        control = ControlType.COMMIT if marker.commit else ControlType.ABORT
        batch = build_control_batch(control, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                    timestamp=now_ms)
        for topic, index in marker.partitions:
            key = (topic, index)
            if partitions.get(topic, index) is None:
                result[key] = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                partition = partitions.leader(topic, index)
            except PartitionError as exc:
                result[key] = ErrorCode(exc.code)
                continue
            if len(partition.isr) < partition.min_insync_replicas:
                result[key] = E.NOT_ENOUGH_REPLICAS
                continue
            appends.append((partition, batch))
            owners.append((i, key))
    outcomes = await partitions.append_many(appends, origin=AppendOrigin.COORDINATOR) if appends else []
    appended = []
    for (partition, _), (i, key), outcome in zip(appends, owners, outcomes):
        if isinstance(outcome, StorageError):
            results[i][key] = ErrorCode(outcome.error_code)
        else:
            results[i][key] = E.NONE
            appended.append((partition, outcome, i, key))
    if appended:
        try:
            await partitions.acknowledge_many([(p, outcome) for p, outcome, _, _ in appended])
        except StorageError as exc:
            for _, _, i, key in appended:
                results[i][key] = ErrorCode(exc.error_code)
            appended = []
    replication = getattr(partitions, "replication", None)
    if appended and replication is not None:
        # acks=all, as Kafka appends markers: the coordinator hears back once the ISR has them
        codes = await replication.wait_for_replicas([(p, outcome.last_offset + 1) for p, outcome, _, _ in appended],
                                                    broker.config["request.timeout.ms"] / 1000)
        for (_, _, i, key), code in zip(appended, codes):
            if code:
                results[i][key] = ErrorCode(code)
    _after_markers(broker, markers, results)
    return results


def _after_markers(broker, markers, results) -> None:
    """Transactional offsets become committed (or are dropped) once their marker is in; verification
    guards of the closed transactions are spent."""
    service = broker.coordinators.get("service")
    if service is None:
        return
    for marker, result in zip(markers, results):
        for (topic, index), code in result.items():
            if code is not E.NONE:
                continue
            service.forget_verification(topic, index, marker.producer_id)
            if topic == OFFSETS_TOPIC:
                service.complete_transactional_offsets(index, marker.producer_id, marker.commit)


# ---- coordinator side ---------------------------------------------------------------------------------
class MarkerSender:
    """The transaction core's MarkerWriter in a cluster: markers go wherever their partitions are led."""

    def __init__(self, service, *, max_backoff_s: float = 1.0):
        self.service = service
        self.max_backoff_s = max_backoff_s
        self._queues: dict[int, _DestinationQueue] = {}   # destination broker -> markers waiting for it

    def write_markers(self, transactional_id, producer_id, producer_epoch, commit, partitions, done) -> None:
        owned = self.service.txn_owner(transactional_id)
        if owned is None:
            return      # not (or no longer) the coordinator: whoever is loads the transaction and resends
        self.service.spawn(self._deliver, transactional_id, producer_id, producer_epoch, commit,
                           set(partitions), owned, done)

    async def _deliver(self, transactional_id, producer_id, producer_epoch, commit, pending, owned, done) -> None:
        service = self.service
        backoff = 0.02
        # No marker before the decision (PrepareCommit / PrepareAbort) is committed in
        # `__transaction_state`: a coordinator elected without that record would find the transaction
        # still ongoing and could abort the partitions this one had already committed.
        while await service.caught_up(owned.topic, owned.index) is not E.NONE:
            if not service.still_owns(owned):
                return
            await trio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff_s)
        while pending:
            if not service.still_owns(owned):
                return
            image = service.broker.image
            by_leader: dict[int, list] = {}
            for tp in sorted(pending):
                part = image.partition(*tp)
                if part is None:
                    pending.discard(tp)     # the topic is gone: nothing left to mark
                elif part.leader >= 0:
                    by_leader.setdefault(part.leader, []).append(tp)
            marker_epoch = owned.epoch
            results: dict = {}
            async with trio.open_nursery() as nursery:
                for leader, tps in by_leader.items():
                    marker = Marker(producer_id, producer_epoch, commit, marker_epoch, tuple(tps))
                    nursery.start_soon(self._send, leader, marker, results)
            for tp, code in results.items():
                if code is E.NONE or code in _GIVE_UP:
                    if code is not E.NONE:
                        log.warning("dropping the %s marker of %s for %s-%d: %s", "commit" if commit else "abort",
                                    transactional_id, tp[0], tp[1], code.name)
                    pending.discard(tp)
                elif code in _FENCED:
                    log.warning("stopped writing markers for %s: %s from %s-%d", transactional_id, code.name, *tp)
                    return
            if pending:
                log.debug("retrying markers of %s for %s", transactional_id, sorted(pending))
                await trio.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
        if service.still_owns(owned):
            done(True)
            await service.settle()

    async def _send(self, leader: int, marker: Marker, results: dict) -> None:
        service = self.service
        broker = service.broker
        if leader == broker.node_id:
            try:
                [per] = await append_markers(broker, [marker], now_ms=service.clock.now_ms())
            except Exception:
                log.exception("writing markers locally failed")
                per = {tp: E.UNKNOWN_SERVER_ERROR for tp in marker.partitions}
            results.update(per)
            return
        results.update(await self._queue_for(leader, marker))

    async def _queue_for(self, leader: int, marker: Marker) -> dict:
        """Send `marker` to broker `leader` in the next WriteTxnMarkers to it: markers of every
        transaction waiting for the same broker share one request, as Kafka's marker channel does."""
        queue = self._queues.setdefault(leader, _DestinationQueue())
        waiter = (marker, trio.Event(), {})
        queue.waiting.append(waiter)
        if not queue.sending:
            queue.sending = True
            self.service.spawn(self._drain, leader, queue)
        await waiter[1].wait()
        return waiter[2]

    async def _drain(self, leader: int, queue: "_DestinationQueue") -> None:
        try:
            while queue.waiting:
                batch, queue.waiting = queue.waiting, []
                try:
                    answers = await self._request(leader, [marker for marker, _, _ in batch])
                except Exception:
                    log.exception("sending markers to broker %d failed", leader)
                    answers = [{tp: E.UNKNOWN_SERVER_ERROR for tp in m.partitions} for m, _, _ in batch]
                for (_, done, box), answer in zip(batch, answers):
                    box.update(answer)
                    done.set()
        finally:
            queue.sending = False
            for marker, done, box in queue.waiting:      # cancelled mid-way: nobody is left hanging
                box.update({tp: E.NETWORK_EXCEPTION for tp in marker.partitions})
                done.set()
            queue.waiting = []

    async def _request(self, leader: int, markers: list[Marker]) -> list[dict]:
        """One WriteTxnMarkers to `leader`: per marker, {partition: error}."""
        from broker.interbroker.client import PeerUnavailable

        try:
            response = await self.service.peer_client().request(
                leader, WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, write_txn_markers_request(markers),
                timeout=self.service.broker.config["request.timeout.ms"] / 1000)
        except PeerUnavailable as exc:
            log.info("markers to broker %d: %s", leader, exc)
            return [{tp: E.NETWORK_EXCEPTION for tp in marker.partitions} for marker in markers]
        answers = []
        for i, marker in enumerate(markers):      # results come back in request order
            entry = response.markers[i] if i < len(response.markers) else None
            answered = {} if entry is None else {(t.name, p.partition_index): _code(p.error_code)
                                                  for t in entry.topics for p in t.partitions}
            answers.append({tp: answered.get(tp, E.UNKNOWN_SERVER_ERROR) for tp in marker.partitions})
        return answers


@dataclass(eq=False)
class _DestinationQueue:
    waiting: list = field(default_factory=list)    # (marker, done event, result box)
    sending: bool = False


def write_txn_markers_request(markers: list[Marker]):
    R = messages.WriteTxnMarkersRequest
    out = []
    for marker in markers:
        by_topic: dict[str, list[int]] = {}
        for topic, index in marker.partitions:
            by_topic.setdefault(topic, []).append(index)
        out.append(R.WritableTxnMarker(
            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
            transaction_result=marker.commit, coordinator_epoch=marker.coordinator_epoch,
            topics=[R.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]))
    return R(markers=out)


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return E.UNKNOWN_SERVER_ERROR
