"""Long polling: an append between a fetch's read and its wait is not missed, and what the fetch reads
after its wait is what a full read would give."""

import socket
import threading
import time

import pytest

from protocol import messages
from tests.broker.raw_client import RawClient, batch


def test_an_append_between_read_and_wait_wakes_the_fetch(broker):
    """The append lands after the fetch has read (nothing) but before it starts waiting.

    Without the re-check the fetch would sleep its whole max_wait_ms (60 s here, far beyond the
    client's 5 s socket timeout) although the data is there.
    """
    manager = broker.broker.partitions
    original_wait = manager.wait_for_data
    injected = []

    async def wait_after_a_racing_append(*args, **kwargs):
        if not injected:
            injected.append(True)
            partition = manager.leader("race", 0)
            result = await manager.append(partition, batch([b"raced"]))
            await manager.acknowledge(partition, result)
        return await original_wait(*args, **kwargs)

    with RawClient("127.0.0.1", broker.port, timeout=5.0) as client:
        client.create_topic("race")
        manager.wait_for_data = wait_after_a_racing_append
        try:
            response = client.fetch("race", 0, 0, max_wait_ms=60_000, min_bytes=1)
        except socket.timeout:
            pytest.fail("the fetch slept through an append that landed before its wait")
        finally:
            manager.wait_for_data = original_wait
    data = response.responses[0].partitions[0]
    assert injected
    assert data.high_watermark == 1
    assert len(data.records) > 0


def _fetch_both_while_one_gets(broker, topic, partition, records, min_bytes, max_bytes):
    """A long-polling Fetch of partitions 0 and 1 from offset 0; half a second after it starts,
    another client appends `records` to `partition`. The answer's partitions by index."""
    F = messages.FetchRequest
    body = F(replica_id=-1, max_wait_ms=20_000, min_bytes=min_bytes, max_bytes=max_bytes,
             isolation_level=0, session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                 topic=topic, partitions=[F.FetchPartition(partition=p, fetch_offset=0,
                                                           partition_max_bytes=1 << 20)
                                          for p in (0, 1)])],
             forgotten_topics_data=[], rack_id="")

    def produce_later():
        time.sleep(0.5)
        with RawClient("127.0.0.1", broker.port) as other:
            other.produce(topic, partition, records, acks=1)

    producer = threading.Thread(target=produce_later)
    producer.start()
    try:
        with RawClient("127.0.0.1", broker.port) as client:
            response = client.request(1, 11, body)
    finally:
        producer.join()
    return {p.partition_index: p for p in response.responses[0].partitions}


def test_after_the_wait_the_partitions_read_again_share_the_byte_budget(broker):
    """Partition 1 has a small batch, too little for min_bytes: the fetch waits. A larger batch on
    partition 0 ends the wait; the budget (max_bytes) now holds partition 0's batch but no longer
    partition 1's as well. Kafka fills the budget in request order, so what partition 1 read before
    the wait must not go out on top (Kafka would send a cut-off piece of it, Odradek whole batches
    only: none); its high watermark still does."""
    small, large = batch([b"s" * 100]), batch([b"L" * 5000])
    with RawClient("127.0.0.1", broker.port) as client:
        client.create_topic("budget", partitions=2)
        assert client.produce("budget", 1, small, acks=1).error_code == 0
    max_bytes = len(large) + len(small) - 1
    parts = _fetch_both_while_one_gets(broker, "budget", 0, large, 1000, max_bytes)
    assert len(parts[0].records) == len(large) and parts[0].high_watermark == 1
    assert len(parts[0].records) + len(parts[1].records or b"") <= max_bytes
    assert parts[1].high_watermark == 1


def test_after_the_wait_an_idle_partition_keeps_its_bytes_and_the_moved_one_is_read(broker):
    first, second = batch([b"a" * 100]), batch([b"b" * 3000])
    with RawClient("127.0.0.1", broker.port) as client:
        client.create_topic("idle-kept", partitions=2)
        assert client.produce("idle-kept", 0, first, acks=1).error_code == 0
    parts = _fetch_both_while_one_gets(broker, "idle-kept", 1, second, 1000, 1 << 20)
    assert len(parts[0].records) == len(first) and parts[0].high_watermark == 1
    assert len(parts[1].records) == len(second) and parts[1].high_watermark == 1
