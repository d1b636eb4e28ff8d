"""Produce batches reach storage as views of the bytes the connection received (no frame copy)."""

from broker.connection import READ_AHEAD
from protocol.records import iter_batches

from tests.broker.raw_client import RawClient, batch


def _capture_appends(broker, topic):
    partition = broker.broker.partitions.leader(topic, 0)
    seen = []
    original = partition.log.append

    def append(records, **kwargs):
        seen.append(records)
        return original(records, **kwargs)

    partition.log.append = append
    return seen


def test_small_and_large_produce_batches_are_not_copied_on_the_way_to_storage(client, broker):
    client.create_topic("views")
    seen = _capture_appends(broker, "views")
    small, large = batch([b"s" * 100]), batch([b"L" * (READ_AHEAD * 3)])
    assert client.produce("views", 0, small).error_code == 0
    assert client.produce("views", 0, large).error_code == 0
    assert [type(records) for records in seen] == [memoryview, memoryview]
    # The small one is a slice of the connection's read-ahead chunk, the large one of its own
    # frame buffer: either way the very bytes received, not a copy of the frame.
    assert type(seen[0].obj) is bytearray and len(seen[0].obj) <= READ_AHEAD
    assert type(seen[1].obj) is bytearray and len(seen[1].obj) > READ_AHEAD
    assert bytes(seen[0]) == small and bytes(seen[1]) == large


def test_many_pipelined_small_frames_across_chunk_boundaries_stay_intact(broker):
    with RawClient("127.0.0.1", broker.port) as client:
        client.create_topic("chunks")
        values = [bytes([i % 251]) * (700 + 13 * i) for i in range(300)]   # > several chunks
        for value in values:
            client.produce("chunks", 0, batch([value]), acks=0)
        fetched = []
        offset = 0
        while len(fetched) < len(values):
            data = client.fetch("chunks", 0, offset, max_wait_ms=2000).responses[0].partitions[0]
            for stored in iter_batches(bytes(data.records)):
                fetched.extend(r.value for r in stored.records())
            offset = len(fetched)
        assert fetched == values
