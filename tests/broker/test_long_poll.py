"""Long polling must not miss an append that lands between a fetch's read and its wait."""

import socket

import pytest

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
