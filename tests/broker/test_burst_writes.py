"""The runner writes a straight burst's responses itself (broker/connection.py): responses done
before a request that waits still go out at once, a write the socket cannot take whole is
finished by the writer in order, and the suspension hook behaves as ``await``."""

import socket

import pytest
import trio

from broker.connection import _noting_suspension
from protocol import messages

from tests.broker.raw_client import RawClient, batch


def test_responses_before_a_waiting_fetch_are_not_held_back(broker, client):
    client.create_topic("held")
    produce = messages.ProduceRequest(acks=1, timeout_ms=30000, topic_data=[
        messages.ProduceRequest.TopicProduceData(name="held", partition_data=[
            messages.ProduceRequest.PartitionProduceData(index=0, records=batch([b"v"]))])])
    F = messages.FetchRequest
    fetch = F(replica_id=-1, max_wait_ms=120_000, min_bytes=1 << 16, max_bytes=1 << 20,
              isolation_level=0, session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                  topic="held", partitions=[F.FetchPartition(partition=0, fetch_offset=0,
                                                             partition_max_bytes=1 << 20)])],
              forgotten_topics_data=[], rack_id="")
    sent = [client.send(0, 9, produce) for _ in range(3)]
    fetch_id = client.send(1, 11, fetch)   # waits: far more bytes asked than there will be
    client.sock.settimeout(60)
    for correlation_id in sent:   # the produce answers come while the fetch still waits
        received_id, response = client.receive(0, 9)
        assert received_id == correlation_id
        assert response.responses[0].partition_responses[0].error_code == 0
    with RawClient("127.0.0.1", broker.port) as other:   # enough bytes for the fetch to answer
        assert other.produce("held", 0, batch([b"x" * (1 << 17)]), acks=1).error_code == 0
    received_id, response = client.receive(1, 11)
    assert received_id == fetch_id
    assert response.responses[0].partitions[0].error_code == 0


def test_a_burst_larger_than_the_socket_takes_comes_back_whole_and_in_order(broker):
    # ApiVersions answers (~500 bytes, never waiting) to a client that reads nothing until it has
    # sent 200 requests: the runner's own write of a burst stops part way (the writer finishes it)
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)   # a small window: writes stall
    slow.settimeout(60)
    slow.connect(("127.0.0.1", broker.port))
    reader = RawClient.__new__(RawClient)
    reader.sock = slow
    reader._ids = iter(range(1, 1 << 30))
    with reader:
        sent = [reader.send(18, 3, messages.ApiVersionsRequest(
            client_software_name="burst", client_software_version="1")) for _ in range(200)]
        for correlation_id in sent:
            received_id, response = reader.receive(18, 3)
            assert received_id == correlation_id
            assert response.error_code == 0 and len(response.api_keys) > 40


async def _straight():
    return "done"


async def _waiting():
    await trio.sleep(0)
    await trio.sleep(0)
    return "done after waiting"


async def _failing_after_wait():
    await trio.sleep(0)
    raise ValueError("from inside")


def test_the_suspension_hook_runs_only_when_the_coroutine_waits():
    calls = []

    async def main():
        results = [await _noting_suspension(_straight(), lambda: calls.append("straight")),
                   await _noting_suspension(_waiting(), lambda: calls.append("waiting"))]
        with pytest.raises(ValueError, match="from inside"):
            await _noting_suspension(_failing_after_wait(), lambda: calls.append("failing"))
        with trio.move_on_after(0.01) as scope:   # cancellation reaches the inner coroutine
            await _noting_suspension(trio.sleep_forever(), lambda: calls.append("forever"))
        assert scope.cancelled_caught
        return results

    assert trio.run(main) == ["done", "done after waiting"]
    assert calls == ["waiting", "failing", "forever"]


def test_a_long_poll_answer_the_socket_takes_only_part_of_comes_back_whole_and_in_order(broker):
    # The fetch waits (min_bytes), a produce from another client wakes it, and its own task
    # writes the answer (header, file slice, tail) straight away: into a client window far smaller
    # than the records, so the inline write stops part way and the writer sends the rest before
    # the ApiVersions answer queued behind it.
    with RawClient("127.0.0.1", broker.port) as other:
        other.create_topic("inline-slices")
    values = [bytes([65 + i]) * 200_000 for i in range(4)]   # ~800 KB in one batch
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.settimeout(60)
    slow.connect(("127.0.0.1", broker.port))
    reader = RawClient.__new__(RawClient)
    reader.sock = slow
    reader._ids = iter(range(1, 1 << 30))
    F = messages.FetchRequest
    fetch = F(replica_id=-1, max_wait_ms=30_000, min_bytes=1 << 19, max_bytes=1 << 21,
              isolation_level=0, session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                  topic="inline-slices", partitions=[F.FetchPartition(
                      partition=0, fetch_offset=0, partition_max_bytes=1 << 21)])],
              forgotten_topics_data=[], rack_id="")
    with reader:
        fetch_id = reader.send(1, 11, fetch)
        versions_id = reader.send(18, 3, messages.ApiVersionsRequest(
            client_software_name="inline", client_software_version="1"))
        with RawClient("127.0.0.1", broker.port) as other:
            assert other.produce("inline-slices", 0, batch(values), acks=1).error_code == 0
        received_id, response = reader.receive(1, 11)
        assert received_id == fetch_id
        partition = response.responses[0].partitions[0]
        assert partition.error_code == 0 and partition.high_watermark == 4
        payload = bytes(partition.records)   # the stored batch: the broker set its offsets
        assert len(payload) == len(batch(values))
        positions = [payload.find(value) for value in values]
        assert -1 not in positions and positions == sorted(positions)
        received_id, response = reader.receive(18, 3)
        assert received_id == versions_id and response.error_code == 0
