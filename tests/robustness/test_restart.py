"""Restarts: records, committed offsets (with their metadata) and producer state survive, both a
clean shutdown of the in-process broker and kill -9 of `odradek serve` with fsync-before-ack."""

from __future__ import annotations

from protocol import ErrorCode, messages
from protocol.records import iter_batches

from broker.testing import running_broker
from tests.broker.raw_client import RawClient, batch
from tests.broker.subprocess_broker import ServeProcess

M = messages


def _commit(client, group, topic, offset, metadata):
    C = M.OffsetCommitRequest
    answer = client.request(8, 8, C(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                    topics=[C.OffsetCommitRequestTopic(name=topic, partitions=[
                                        C.OffsetCommitRequestPartition(
                                            partition_index=0, committed_offset=offset,
                                            committed_metadata=metadata)])]))
    assert answer.topics[0].partitions[0].error_code == 0


def _offsets(client, group):
    F = M.OffsetFetchRequest
    answer = client.request(9, 7, F(group_id=group, topics=None, require_stable=False))
    return [(t.name, [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions])
            for t in answer.topics]


def _write(client):
    assert client.create_topic("kept", 1).error_code == 0
    assert client.request(10, 3, M.FindCoordinatorRequest(key="grp", key_type=0)).error_code == 0
    init = client.request(22, 4, M.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1))
    pid, epoch = init.producer_id, init.producer_epoch
    first = batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    second = batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=2)
    assert client.produce("kept", 0, first).base_offset == 0
    assert client.produce("kept", 0, second).base_offset == 2
    _commit(client, "grp", "kept", 2, "keep-me")
    return second


def _check(client, second):
    data = client.fetch("kept", 0, 0).responses[0].partitions[0]
    assert data.error_code == 0 and data.high_watermark == 3
    assert [(b.base_offset, b.record_count) for b in iter_batches(bytes(data.records))] == [(0, 2), (2, 1)]
    assert _offsets(client, "grp") == [("kept", [(0, 2, "keep-me")])]
    # the producer state survived too: a retried batch is still recognised as a duplicate
    answer = client.produce("kept", 0, second)
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 2)
    assert client.fetch("kept", 0, 0).responses[0].partitions[0].high_watermark == 3


def test_clean_restart_keeps_records_offsets_and_producer_state(tmp_path):
    data_dir = tmp_path / "data"
    with running_broker(data_dir) as running:
        with RawClient("127.0.0.1", running.port) as client:
            second = _write(client)
    with running_broker(data_dir) as running:
        with RawClient("127.0.0.1", running.port) as client:
            _check(client, second)


def test_kill_9_with_flush_before_acknowledge_loses_nothing_acknowledged(tmp_path):
    process = ServeProcess(tmp_path / "data", "log.flush.before.acknowledge=true",
                           "offsets.topic.num.partitions=1").start(timeout=60)
    try:
        with RawClient("127.0.0.1", process.port) as client:
            second = _write(client)
        process.kill()
        process.process = None
        process.start(timeout=60)
        with RawClient("127.0.0.1", process.port) as client:
            _check(client, second)
    finally:
        process.kill()
