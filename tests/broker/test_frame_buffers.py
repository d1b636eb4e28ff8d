"""Produce batches reach storage as views of the bytes the connection received (no frame copy), and a
large frame's buffer is lent again only when nothing views it any more."""

from broker.connection import READ_AHEAD
from broker.frame_buffers import ROUND, FrameBuffers, rounded
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


def _fetch_values(client, topic):
    data = client.fetch(topic, 0, 0, max_wait_ms=2000).responses[0].partitions[0]
    return [r.value for stored in iter_batches(bytes(data.records)) for r in stored.records()]


def test_a_large_frame_buffer_serves_the_next_large_frame_once_its_request_is_done(client, broker):
    client.create_topic("warm")
    values = [bytes([65 + i]) * (READ_AHEAD * 2 + 1000 * i) for i in range(4)]
    pool = broker.broker.frame_buffers
    reused = pool.reused
    for value in values:
        assert client.produce("warm", 0, batch([value])).error_code == 0
    # The first frame needed a new buffer; the others fit in the one it gave back.
    assert pool.reused - reused >= len(values) - 1
    assert _fetch_values(client, "warm") == values


def test_a_buffer_still_viewed_after_its_request_is_never_lent_again(client, broker):
    client.create_topic("kept")
    seen = _capture_appends(broker, "kept")   # keeps a view of every frame's records
    first, second = batch([b"1" * (READ_AHEAD * 2)]), batch([b"2" * (READ_AHEAD * 2)])
    assert client.produce("kept", 0, first).error_code == 0
    assert client.produce("kept", 0, second).error_code == 0
    assert seen[0].obj is not seen[1].obj
    assert bytes(seen[0]) == first and bytes(seen[1]) == second


def test_the_pool_lends_the_smallest_fit_and_keeps_within_its_bounds():
    pool = FrameBuffers(keep_bytes=3 * ROUND, largest_kept=2 * ROUND)
    small, large, huge = bytearray(ROUND), bytearray(2 * ROUND), bytearray(4 * ROUND)
    for buffer in (large, small, huge):
        pool.give_back(memoryview(buffer)[:10])
    assert pool.take(ROUND + 1) is large        # (huge was too large to keep)
    pool.give_back(memoryview(large))
    assert pool.take(100) is small and pool.take(100) is large and pool.take(100) is None
    for buffer in (small, large, bytearray(2 * ROUND)):   # over keep_bytes: the oldest go first
        pool.give_back(memoryview(buffer))
    assert pool.take(1) is not small and pool.take(1) is None


def test_a_view_that_outlives_its_frame_keeps_the_buffer_out_of_the_pool():
    pool = FrameBuffers()
    buffer = bytearray(rounded(READ_AHEAD * 2))
    frame = memoryview(buffer)[:READ_AHEAD * 2]
    kept = frame[100:200]    # e.g. a group member's metadata still held by the coordinator
    pool.give_back(frame)
    assert pool.take(1) is None
    del kept
    pool.give_back(memoryview(buffer))
    assert pool.take(1) is buffer
