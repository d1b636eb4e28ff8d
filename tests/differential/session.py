"""A raw-protocol session that builds broker state the same way on Kafka and on Odradek (topics,
records, transactions, a consumer group), for the scenario sweep (scenarios.py) to question.

Every step retries the answers a client would retry (a coordinator loading, a topic being created),
so both brokers are questioned once settled.
"""

from __future__ import annotations

import time

from protocol import messages
from protocol.consumer_protocol import Subscription, encode_subscription
from protocol.records import SimpleRecord, build_batch

from tests.broker.raw_client import RawClient
from tests.differential.replay import RETRIABLE, RETRIES, RETRY_PAUSE_S, _retriable


METADATA_SETTLE_S = 0.2


class Session(RawClient):
    def settled(self, api_key: int, version: int, body):
        """The answer once it holds no error a client would retry."""
        for _ in range(RETRIES):
            answer = self.request(api_key, version, body)
            if not _retriable(answer):
                return answer
            time.sleep(RETRY_PAUSE_S)
        return answer

    def produce(self, *args, **kwargs):
        for _ in range(RETRIES):
            answer = super().produce(*args, **kwargs)
            if answer is None or answer.error_code not in RETRIABLE:     # None: acks=0
                return answer
            time.sleep(RETRY_PAUSE_S)
        return answer

    @staticmethod
    def metadata_settles() -> None:
        """A moment for a change the controller committed to reach the broker's view: Kafka answers
        an alteration once committed, and its broker may describe the old state just after."""
        time.sleep(METADATA_SETTLE_S)

    # ---------------------------------------------------------------------------------- topics
    def topic(self, name: str, partitions: int = 1, configs: dict | None = None) -> bytes:
        """Create `name` and wait until its leader answers; its topic id."""
        answer = self.create_topic(name, partitions, configs)
        assert answer.error_code in (0, 36), (name, answer)
        for _ in range(RETRIES):
            meta = self.metadata([name])
            partitions = meta.topics[0].partitions
            # the metadata may name a leader before that broker leads: wait until each answers too
            if partitions and all(p.error_code == 0 for p in partitions) and \
                    all(self.list_offset(name, p.partition_index, -1).error_code == 0 for p in partitions):
                return meta.topics[0].topic_id
            time.sleep(RETRY_PAUSE_S)
        raise AssertionError(f"{name} has no leader")

    def metadata(self, names, version: int = 12):
        M = messages.MetadataRequest
        return self.request(3, version, M(topics=[M.MetadataRequestTopic(name=n) for n in names],
                                          allow_auto_topic_creation=False))

    def node_id(self) -> int:
        return self.request(3, 12, messages.MetadataRequest(topics=[])).brokers[0].node_id

    def leader_epoch(self, topic: str, partition: int = 0) -> int:
        return self.metadata([topic]).topics[0].partitions[partition].leader_epoch

    def append(self, topic: str, values, partition: int = 0, acks: int = -1, **batch_args):
        answer = self.produce(topic, partition, _batch(values, **batch_args), acks=acks)
        assert answer.error_code == 0, answer
        return answer.base_offset

    # ----------------------------------------------------------------------------- transactions
    def transaction(self, txn_id: str, topic: str, values, *, commit: bool | None, partition: int = 0):
        """One transaction of `values` on topic-partition, committed, aborted or left open (None)."""
        pid, epoch = self.init_producer(txn_id)
        A = messages.AddPartitionsToTxnRequest
        added = self.settled(24, 3, A(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                                      v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                          A.AddPartitionsToTxnTopic(name=topic, partitions=[partition])]))
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        answer = self.produce(topic, partition, _batch(values, producer_id=pid, producer_epoch=epoch,
                                                       base_sequence=0, transactional=True),
                              transactional_id=txn_id)
        assert answer.error_code == 0, answer
        if commit is not None:
            self.end_transaction(txn_id, pid, epoch, commit)
        return pid, epoch

    def init_producer(self, txn_id: str | None) -> tuple[int, int]:
        # as a client does: finding the coordinator makes Kafka create __transaction_state
        if txn_id is not None:
            self.settled(10, 3, messages.FindCoordinatorRequest(key=txn_id, key_type=1))
        answer = self.settled(22, 4, messages.InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=600_000, producer_id=-1, producer_epoch=-1))
        assert answer.error_code == 0, answer
        return answer.producer_id, answer.producer_epoch

    def end_transaction(self, txn_id: str, pid: int, epoch: int, commit: bool) -> None:
        answer = self.settled(26, 3, messages.EndTxnRequest(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit))
        assert answer.error_code == 0, answer

    def wait_stable(self, topic: str, partition: int = 0) -> None:
        """Until the last stable offset reaches the high watermark (markers are written after EndTxn)."""
        for _ in range(RETRIES):
            if self.list_offset(topic, partition, -1, isolation_level=1).offset == \
                    self.list_offset(topic, partition, -1).offset:
                return
            time.sleep(RETRY_PAUSE_S)

    # -------------------------------------------------------------------------- consumer groups
    def join(self, group: str, topics: list[str]) -> tuple[str, int]:
        """A one-member classic consumer group subscribed to `topics`: (member id, generation)."""
        J = messages.JoinGroupRequest
        self.settled(10, 3, messages.FindCoordinatorRequest(key=group, key_type=0))
        metadata = encode_subscription(Subscription(topics=topics, user_data=None, owned_partitions=[]), 1)
        member = ""
        for _ in range(RETRIES):
            joined = self.request(11, 7, J(group_id=group, session_timeout_ms=30_000,
                                           rebalance_timeout_ms=30_000, member_id=member,
                                           group_instance_id=None, protocol_type="consumer",
                                           protocols=[J.JoinGroupRequestProtocol(name="range",
                                                                                 metadata=metadata)]))
            member = joined.member_id or member
            if joined.error_code == 0:
                break
            time.sleep(0 if joined.error_code == 79 else RETRY_PAUSE_S)
        S = messages.SyncGroupRequest
        synced = self.request(14, 5, S(group_id=group, generation_id=joined.generation_id, member_id=member,
                                       group_instance_id=None, protocol_type="consumer",
                                       protocol_name="range", assignments=[]))
        assert synced.error_code == 0, synced
        return member, joined.generation_id

    def commit(self, group: str, offsets: dict, member: str = "", generation: int = -1):
        """OffsetCommit v8 of {(topic, partition): offset}."""
        self.settled(10, 3, messages.FindCoordinatorRequest(key=group, key_type=0))
        C = messages.OffsetCommitRequest
        by_topic: dict = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(C.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=""))
        answer = self.settled(8, 8, C(group_id=group, generation_id_or_member_epoch=generation,
                                      member_id=member, group_instance_id=None, topics=[
                                          C.OffsetCommitRequestTopic(name=t, partitions=ps)
                                          for t, ps in by_topic.items()]))
        assert all(p.error_code == 0 for t in answer.topics for p in t.partitions), answer


_last_stamp = 0


def _batch(values, **kwargs) -> bytes:
    """A batch of `values` stamped after every record built before (two appends in one millisecond
    would otherwise tie, and which record has the largest timestamp would depend on the clock)."""
    global _last_stamp
    now = max(int(time.time() * 1000), _last_stamp + 1)
    records = [SimpleRecord(value=v, key=k, timestamp=now + i) for i, (k, v) in enumerate(_keyed(values))]
    _last_stamp = now + len(records)
    return build_batch(records, **kwargs)


def _keyed(values):
    """Values as (key, value): a bare value has no key."""
    return [v if isinstance(v, tuple) else (None, v) for v in values]
