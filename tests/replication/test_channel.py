"""The follower's channel reads a large Fetch answer straight into a pooled buffer and gives it back at
the next call, unless the answer (a view of it) is still alive."""

import struct
import uuid

import trio

import protocol
from protocol import messages as m
from protocol import records as r

from broker.frame_buffers import FrameBuffers
from broker.replication.channel import BrokerChannel
from broker.replication.fetcher import FETCH_VERSION

FETCH = m.FetchRequest


def _request():
    return FETCH(replica_state=FETCH.ReplicaState(replica_id=2, replica_epoch=1), max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                 session_id=0, session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id="")


def _answer(correlation_id: int, value: bytes) -> bytes:
    batch = r.build_batch([r.SimpleRecord(value=value, key=None, timestamp=1)])
    body = m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(
        topic_id=uuid.UUID(int=7), partitions=[m.FetchResponse.PartitionData(
            partition_index=0, high_watermark=1, records=batch)])])
    data = protocol.encode_response(1, FETCH_VERSION, correlation_id, body)
    return struct.pack(">i", len(data)) + data


async def _leader(listener, values):
    """Answers each request with a one-batch Fetch response holding the next value, sent in pieces."""
    stream = await listener.accept()
    buffered = b""
    for value in values:
        while len(buffered) < 4 or len(buffered) < 4 + struct.unpack_from(">i", buffered)[0]:
            buffered += await stream.receive_some(65536)
        size = struct.unpack_from(">i", buffered)[0]
        header = protocol.decode_request_header(buffered[4:4 + size])[0]
        buffered = buffered[4 + size:]
        answer = _answer(header.correlation_id, value)
        for start in range(0, len(answer), 50_000):
            await stream.send_all(answer[start:start + 50_000])


def _value_of(response) -> bytes:
    records = response.responses[0].partitions[0].records
    [batch] = r.iter_batches(records)
    return next(iter(batch.records())).value


def test_large_answers_reuse_the_buffer_only_once_the_last_one_is_let_go():
    values = [bytes([ord("a") + i]) * 300_000 for i in range(4)]
    pool = FrameBuffers()

    async def main():
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_leader, listeners[0], values)
            channel = BrokerChannel(("127.0.0.1", port), "test-fetcher", buffers=pool)
            kept = await channel.call(1, FETCH_VERSION, _request())
            second = await channel.call(1, FETCH_VERSION, _request())
            assert pool.reused == 0          # the first answer is still held: its buffer too
            assert _value_of(kept) == values[0] and _value_of(second) == values[1]
            seen = [_value_of(second)]
            second = None                     # let go, as the fetcher does before its next call
            for _ in values[2:]:
                response = await channel.call(1, FETCH_VERSION, _request())
                seen.append(_value_of(response))
                response = None
            await channel.aclose()
        assert seen == values[1:] and _value_of(kept) == values[0]
        assert pool.reused == 2               # the second answer's buffer served the third and fourth

    trio.run(main)
