"""IsrUpdates batches the ISR proposals of every led partition into one AlterPartition in flight,
as Kafka's AlterPartitionManager; answers are applied per partition, retriable ones sent again."""

import uuid
from types import SimpleNamespace

import trio

from broker.replication.isr_updates import IsrUpdates
from broker.replication.leader import IsrProposal
from protocol import ErrorCode, messages as m


class FakeState:
    def __init__(self, isr, proposal):
        self.isr, self.pending, self.leader_epoch, self.partition_epoch = tuple(isr), proposal, 4, 7
        self.followers = {}
        self.failed = []

    def proposal_committed(self, partition_epoch, isr):
        self.partition_epoch, self.isr, self.pending = partition_epoch, tuple(isr), None

    def proposal_failed(self, error):            # as LeaderState: a timeout is retried, a fence not
        self.failed.append(error)
        return error == ErrorCode.REQUEST_TIMED_OUT and self.pending is not None


class FakeClient:
    """Answers each AlterPartition with the error `errors` names for a partition (NONE otherwise)."""

    def __init__(self, errors):
        self.errors, self.requests = errors, []

    async def call(self, api_key, version, request, timeout_s=None):
        self.requests.append(request)
        await trio.sleep(0.01)
        R = m.AlterPartitionResponse
        topics = []
        for topic in request.topics:
            answers = []
            for p in topic.partitions:
                error = self.errors.pop((topic.topic_id, p.partition_index), ErrorCode.NONE)
                answers.append(R.PartitionData(
                    partition_index=p.partition_index, error_code=int(error), leader_id=1,
                    leader_epoch=p.leader_epoch, isr=[s.broker_id for s in p.new_isr_with_epochs],
                    leader_recovery_state=0, partition_epoch=p.partition_epoch + 1))
            topics.append(R.TopicData(topic_id=topic.topic_id, partitions=answers))
        return R(error_code=0, topics=topics)


def _setup(nursery, errors):
    client = FakeClient(errors)
    committed = []
    image = SimpleNamespace(brokers={b: SimpleNamespace(epoch=10 + b) for b in (1, 2, 3)})
    broker = SimpleNamespace(controller=SimpleNamespace(client=client), replication_nursery=nursery,
                             image=image, node_id=1, broker_epoch=11)
    manager = SimpleNamespace(on_isr_committed=lambda p, s, shrank: committed.append((p.index, shrank)))
    return IsrUpdates(broker, manager), client, committed


def _partition(topic_id, index, isr, new_isr):
    proposal = IsrProposal(tuple(new_isr), 4, 7)
    state = FakeState(isr, proposal)
    partition = SimpleNamespace(topic="t", topic_id=topic_id, index=index, replica_state=state)
    return partition, state, proposal


async def test_pending_proposals_travel_in_one_request():
    a, b = uuid.uuid4(), uuid.uuid4()
    async with trio.open_nursery() as nursery:
        updates, client, committed = _setup(nursery, {})
        parts = [_partition(a, 0, (1, 2, 3), (1, 2)), _partition(a, 1, (1, 2), (1, 2, 3)),
                 _partition(b, 0, (1, 3), (1, 2, 3))]
        for part in parts:
            updates.send(*part)
    assert len(client.requests) == 1
    request = client.requests[0]
    assert sorted((t.topic_id, p.partition_index) for t in request.topics for p in t.partitions) == \
        sorted([(a, 0), (a, 1), (b, 0)])
    assert sorted(committed) == [(0, False), (0, True), (1, False)]
    assert [s.isr for _, s, _ in parts] == [(1, 2), (1, 2, 3), (1, 2, 3)]
    assert all(s.pending is None for _, s, _ in parts)


async def test_a_retriable_answer_is_sent_again_alone_and_a_final_one_is_not():
    a = uuid.uuid4()
    async with trio.open_nursery() as nursery:
        updates, client, committed = _setup(nursery, {(a, 1): ErrorCode.REQUEST_TIMED_OUT,
                                                      (a, 2): ErrorCode.FENCED_LEADER_EPOCH})
        parts = [_partition(a, i, (1, 2), (1, 2, 3)) for i in range(3)]
        for part in parts:
            updates.send(*part)
    assert [sorted(p.partition_index for t in r.topics for p in t.partitions)
            for r in client.requests] == [[0, 1, 2], [1]]
    assert sorted(committed) == [(0, False), (1, False)]
    assert parts[2][1].failed == [ErrorCode.FENCED_LEADER_EPOCH]


async def test_a_proposal_replaced_meanwhile_is_not_sent():
    a = uuid.uuid4()
    async with trio.open_nursery() as nursery:
        updates, client, committed = _setup(nursery, {})
        partition, state, proposal = _partition(a, 0, (1, 2), (1, 2, 3))
        updates.send(partition, state, proposal)
        state.pending = None                      # the image answered it before the send
    assert client.requests == [] and committed == []
