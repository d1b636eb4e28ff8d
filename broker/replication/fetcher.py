"""Follower fetchers: the partitions this broker follows, pulled from their leaders with Fetch.

``FetcherPool`` keeps ``num.replica.fetchers`` fetchers per source broker (a partition always goes to
the same one); each ``ReplicaFetcher`` loops: one Fetch (the latest version, ReplicaState with this
broker's id and epoch, ``replica.fetch.wait.max.ms`` / ``replica.fetch.min.bytes`` /
``replica.fetch.max.bytes`` / ``replica.fetch.response.max.bytes``) for all its partitions, within
an incremental fetch session (``fetch_session``: only the partitions whose position moved go out,
only those with news come back), then per partition:

- records: appended unchanged (same offsets, same bytes; storage checks the CRCs and keeps producer
  state, the transaction index and the leader-epoch cache as the leader did); then the high watermark
  (the leader's, capped by our log end) and the log start offset the leader sent;
- DivergingEpoch: truncate where the logs part (``divergence.truncation_offset``), then fetch again;
- OFFSET_OUT_OF_RANGE: behind the leader's log start, restart the log empty there; past its end (an
  unclean election), truncate to the leader's high watermark;
- a leadership error: wait for the metadata image to move the partition (``replica.fetch.backoff.ms``).
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

import trio

from protocol import ErrorCode, messages as m
from protocol.records import LOG_OVERHEAD

from storage.errors import StorageError

from broker.interbroker.client import inter_broker_listener_name
from broker.log_dir_moves import append_following_moves

from .channel import BrokerChannel, ChannelError
from .divergence import truncation_offset
from .fetch_session import SESSION_ERRORS, FollowerSession

log = logging.getLogger("odradek.replication")

FETCH_VERSION = 17
# Appends past this size go to a worker thread (the same bound the Produce path uses).
INLINE_APPEND_BYTES = 64 * 1024


@dataclass(eq=False)
class FetchState:
    partition: object
    leader_epoch: int
    delayed_until: float = 0.0


def whole_batches(records) -> memoryview:
    """The prefix of `records` made of whole batches (a Kafka leader may cut the last one short)."""
    view = memoryview(records)
    end = pos = 0
    while pos + LOG_OVERHEAD <= len(view):
        length = int.from_bytes(view[pos + 8:pos + 12], "big", signed=True)
        if length <= 0 or pos + LOG_OVERHEAD + length > len(view):
            break
        pos += LOG_OVERHEAD + length
        end = pos
    return view[:end]


def endpoint_for(broker_image, config) -> tuple[str, int] | None:
    """The address to reach a broker on: its endpoint of our inter-broker listener (by name:
    inter.broker.listener.name, else the listener of security.inter.broker.protocol)."""
    wanted = inter_broker_listener_name(config)
    for endpoint in broker_image.endpoints:
        if endpoint.name == wanted:
            return endpoint.host, endpoint.port
    return None


class FetcherPool:
    def __init__(self, broker, partitions, nursery: trio.Nursery):
        self.broker = broker
        self.partitions = partitions
        self.nursery = nursery
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._where: dict[object, ReplicaFetcher] = {}

    def add(self, partition, leader: int, leader_epoch: int) -> None:
        count = max(1, self.broker.config["num.replica.fetchers"])
        key = (leader, zlib.crc32(f"{partition.topic}-{partition.index}".encode()) % count)
        current = self._where.get(partition)
        if current is not None and current.key != key:
            current.remove(partition)
        fetcher = self.fetchers.get(key)
        if fetcher is None or fetcher.stopped:
            fetcher = self.fetchers[key] = ReplicaFetcher(self.broker, self.partitions, key)
            self.nursery.start_soon(fetcher.run)
        fetcher.add(partition, leader_epoch)
        self._where[partition] = fetcher

    def remove(self, partition) -> None:
        fetcher = self._where.pop(partition, None)
        if fetcher is not None:
            fetcher.remove(partition)

    def lag(self) -> dict[tuple[str, int], int]:
        """Per followed partition: how far its log end is behind the leader's high watermark."""
        out = {}
        for fetcher in self.fetchers.values():
            for state in fetcher.states.values():
                p = state.partition
                out[(p.topic, p.index)] = max(0, fetcher.leader_high_watermarks.get(p, 0)
                                              - p.log.log_end_offset)
        return out


class ReplicaFetcher:
    def __init__(self, broker, partitions, key: tuple[int, int]):
        self.broker = broker
        self.partitions = partitions
        self.key = key
        self.leader_id = key[0]
        self.states: dict[object, FetchState] = {}
        self.leader_high_watermarks: dict[object, int] = {}
        self.stopped = False
        self._changed = trio.Event()
        self._channel: BrokerChannel | None = None
        self.session = FollowerSession()
        self._endpoint_of = None          # the leader's broker image the address below is from
        self._address: tuple[str, int] | None = None

    def add(self, partition, leader_epoch: int) -> None:
        state = self.states.get(partition)
        if state is None or state.leader_epoch != leader_epoch:
            self.states[partition] = FetchState(partition, leader_epoch)
        self._changed.set()

    def remove(self, partition) -> None:
        self.states.pop(partition, None)
        self.leader_high_watermarks.pop(partition, None)
        self._changed.set()

    # ------------------------------------------------------------------------------------ loop
    async def run(self) -> None:
        config = self.broker.config
        try:
            while True:
                now = trio.current_time()
                ready = [s for s in self.states.values() if s.delayed_until <= now]
                if not ready:
                    self._changed = trio.Event()
                    wake = min((s.delayed_until for s in self.states.values()), default=None)
                    with trio.move_on_after(0.5 if wake is None else max(wake - now, 0.001)):
                        await self._changed.wait()
                    continue
                channel = self._connect()
                if channel is None:
                    await trio.sleep(config["replica.fetch.backoff.ms"] / 1000)
                    continue
                request, sent = self._request(ready)
                response = None   # (its frame's buffer goes back to the pool at the next call)
                try:
                    response = await channel.call(1, FETCH_VERSION, request)
                except ChannelError as exc:
                    log.info("fetch from broker %d failed: %s", self.leader_id, exc)
                    self._channel = None
                    self.session.reset()
                    await trio.sleep(config["replica.fetch.backoff.ms"] / 1000)
                    continue
                self.session.answered(response.error_code, response.session_id)
                if response.error_code in SESSION_ERRORS:
                    continue    # the leader lost our session (evicted, restarted): a full fetch now
                if response.error_code:
                    await trio.sleep(config["replica.fetch.backoff.ms"] / 1000)
                    continue
                await self._process(response, sent)
        finally:
            self.stopped = True
            if self._channel is not None:
                with trio.CancelScope(shield=True):
                    await self._channel.aclose()

    def _connect(self) -> BrokerChannel | None:
        broker_image = self.broker.image.brokers.get(self.leader_id)
        if broker_image is not self._endpoint_of:
            # (parsing the listeners on every round trip cost a follower a few % of its CPU)
            self._endpoint_of = broker_image
            self._address = endpoint_for(broker_image, self.broker.config) if broker_image else None
        address = self._address
        if address is None:
            return None
        if self._channel is None or self._channel.address != address:
            self._channel = BrokerChannel(
                address, f"broker-{self.broker.node_id}-fetcher-{self.key[1]}",
                security=getattr(self.broker, "inter_broker_security", None),
                buffers=getattr(self.broker, "frame_buffers", None))
        return self._channel

    def _request(self, ready):
        """The Fetch for the `ready` partitions (only what changed since the last one, within the
        fetch session), and every ready partition by (topic id, index) for reading the answer."""
        config = self.broker.config
        R = m.FetchRequest
        max_bytes = config["replica.fetch.max.bytes"]
        wanted, states = {}, {}
        for state in ready:
            p = state.partition
            log_ = p.log
            key = (p.topic_id, p.index)
            wanted[key] = (state.leader_epoch, log_.log_end_offset, log_.latest_epoch,
                           log_.log_start_offset, max_bytes)
            states[key] = state
        send, forget = self.session.plan(wanted)
        by_topic: dict = {}
        for key in send:
            leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset, _ = wanted[key]
            by_topic.setdefault(key[0], []).append(R.FetchPartition(
                partition=key[1], current_leader_epoch=leader_epoch, fetch_offset=fetch_offset,
                last_fetched_epoch=last_fetched_epoch, log_start_offset=log_start_offset,
                partition_max_bytes=max_bytes))
        forgotten: dict = {}
        for topic_id, index in forget:
            forgotten.setdefault(topic_id, []).append(index)
        request = R(
            replica_state=R.ReplicaState(replica_id=self.broker.node_id,
                                         replica_epoch=self.broker.broker_epoch),
            max_wait_ms=config["replica.fetch.wait.max.ms"], min_bytes=config["replica.fetch.min.bytes"],
            max_bytes=config["replica.fetch.response.max.bytes"], isolation_level=0,
            session_id=self.session.session_id, session_epoch=self.session.epoch,
            topics=[R.FetchTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[R.ForgottenTopic(topic_id=t, partitions=ps)
                                   for t, ps in forgotten.items()],
            rack_id=config["broker.rack"] or "")
        return request, states

    async def _process(self, response, sent) -> None:
        backoff = self.broker.config["replica.fetch.backoff.ms"] / 1000
        for topic in response.responses:
            for data in topic.partitions:
                state = sent.get((topic.topic_id, data.partition_index))
                if state is None or self.states.get(state.partition) is not state:
                    continue   # no longer followed from here (the image moved it meanwhile)
                try:
                    await self._process_partition(state, data)
                except StorageError as exc:
                    log.warning("%s-%d: replica append failed: %s", state.partition.topic,
                                state.partition.index, exc)
                    state.delayed_until = trio.current_time() + backoff

    async def _process_partition(self, state: FetchState, data) -> None:
        partition = state.partition
        log_ = partition.log
        backoff = self.broker.config["replica.fetch.backoff.ms"] / 1000
        error = data.error_code
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(partition, data)
            return
        if error:
            if error not in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                             ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             ErrorCode.UNKNOWN_TOPIC_ID):
                log.info("%s-%d: fetch from leader %d answered %s", partition.topic, partition.index,
                         self.leader_id, ErrorCode(error).name)
            state.delayed_until = trio.current_time() + backoff
            return
        diverging = data.diverging_epoch      # (-1, -1), Kafka's default, means none
        if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            cut = truncation_offset(log_, diverging.epoch, diverging.end_offset)
            log.info("%s-%d: diverged from leader %d at epoch %d: truncating %d -> %d", partition.topic,
                     partition.index, self.leader_id, diverging.epoch, log_.log_end_offset, cut.offset)
            await self._off_loop(partition, log_.truncate_to, cut.offset)
            return
        records = data.records
        if records:
            batches = whole_batches(records)
            if len(batches):
                if len(batches) <= INLINE_APPEND_BYTES:
                    self._append(partition, batches)
                else:
                    await self._off_loop(partition, self._append, partition, batches)
                if self.states.get(partition) is not state:
                    return    # leader (or gone) meanwhile: the rest is no follower's business
        self.leader_high_watermarks[partition] = data.high_watermark
        high_watermark = min(data.high_watermark, log_.log_end_offset)
        if high_watermark > log_.high_watermark:
            log_.set_high_watermark(high_watermark)
        if data.log_start_offset > log_.log_start_offset:
            await self.broker.run_blocking(log_.advance_log_start_offset, data.log_start_offset)
        partition.wake()

    async def _off_loop(self, partition, function, *args) -> None:
        """Run a follower's append/truncation in a worker thread; becoming leader meanwhile waits
        for it before starting the new epoch (the leader-epoch cache must see the final log end)."""
        partition.replica_io = True
        try:
            await self.broker.run_blocking(function, *args)
        finally:
            partition.replica_io = False
            if partition.deferred_epoch_start:
                self.partitions.replication.epoch_start_after_io(partition)

    @staticmethod
    def _append(partition, batches) -> None:
        from storage.log import AppendOrigin

        append_following_moves(partition, batches, origin=AppendOrigin.REPLICATION)

    async def _out_of_range(self, partition, data) -> None:
        log_ = partition.log
        if data.log_start_offset >= 0 and log_.log_end_offset < data.log_start_offset:
            log.info("%s-%d: behind leader %d's log start %d: restarting the log there",
                     partition.topic, partition.index, self.leader_id, data.log_start_offset)
            await self._off_loop(partition, log_.truncate_fully_and_start_at, data.log_start_offset)
        elif data.high_watermark >= 0 and log_.log_end_offset > data.high_watermark:
            log.warning("%s-%d: past leader %d's log end: truncating to its high watermark %d",
                        partition.topic, partition.index, self.leader_id, data.high_watermark)
            await self._off_loop(partition, log_.truncate_to, data.high_watermark)
        else:
            await trio.sleep(self.broker.config["replica.fetch.backoff.ms"] / 1000)
