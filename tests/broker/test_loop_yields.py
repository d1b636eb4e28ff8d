"""Large jobs hand the event loop back while they run: checked by counting the turns a concurrent
ticker task gets, never by timing them. And the loop-hold watch reports a step that held the loop."""

import collections
import logging
import time
import uuid
from dataclasses import dataclass, field

import trio

import protocol
from protocol import messages

from broker.connection import Connection
from broker.handlers import metadata_encoding
from broker.loop_holds import LoopHoldWatch

Response = messages.MetadataResponse
TOPICS, PER_TOPIC = 50, 200   # the bench's scale rows: 10,000 partitions


@dataclass(eq=False)
class FakeTopic:
    name: str
    partitions: dict = field(default_factory=dict)


def _entry(topic: FakeTopic):
    return Response.MetadataResponseTopic(
        error_code=0, name=topic.name, topic_id=uuid.uuid4(), is_internal=False,
        partitions=[Response.MetadataResponsePartition(
            error_code=0 if index else 5, partition_index=index, leader_id=1, leader_epoch=0,
            replica_nodes=[1], isr_nodes=[1], offline_replicas=[]) for index in sorted(topic.partitions)])


async def _with_ticker(job):
    """Runs `job()` beside a task that counts its turns on the loop; (job's result, turns)."""
    turns = 0
    result = []

    async def ticker():
        nonlocal turns
        while True:
            await trio.lowlevel.checkpoint()
            turns += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await trio.lowlevel.checkpoint()
        before = turns
        result.append(await job())
        nursery.cancel_scope.cancel()
    return result[0], turns - before


def test_a_10000_partition_metadata_answer_yields_while_it_is_encoded():
    topics = [FakeTopic(f"scale-{t}", {p: None for p in range(PER_TOPIC)}) for t in range(TOPICS)]
    head = Response(brokers=[Response.MetadataResponseBroker(node_id=1, host="h", port=9092)],
                    cluster_id="c", controller_id=1, topics=[])
    live = frozenset({1})

    async def answer():
        return await metadata_encoding.encoded_answer(head, 12, topics, live, len(topics), _entry)

    response, turns = trio.run(_with_ticker, answer)
    # Encoding 10,000 partitions from a cold cache: the ticker ran between the slices.
    assert turns >= TOPICS * PER_TOPIC // metadata_encoding.SLICE_WORK - 1
    _, decoded = protocol.decode_response(3, 12, protocol.encode_response(3, 12, 1, response))
    assert [t.name for t in decoded.topics] == [t.name for t in topics]
    assert sum(len(t.partitions) for t in decoded.topics) == TOPICS * PER_TOPIC
    assert len(response.errors) == TOPICS   # partition 0 of each is LEADER_NOT_AVAILABLE (5): counted

    # Warm: the same answer is spliced from the cache (and still yields between slices of topics).
    again, _ = trio.run(_with_ticker, answer)
    assert again.topic_parts == response.topic_parts


def test_the_loop_hold_watch_names_the_task_that_held_the_loop(caplog):
    watch = LoopHoldWatch(threshold_ms=20, sample_every_ms=2)

    async def main():
        async def hog():
            time.sleep(0.2)   # deliberately blocks the loop

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hog, name="the-hog")

    with caplog.at_level(logging.WARNING, logger="odradek.loop"):
        trio.run(main, instruments=[watch])
    assert watch.holds_by_task["the-hog"] == 1
    assert "the-hog" in watch.summary()
    assert any("test_loop_yields:hog" in stack for *_, stacks in watch.longest for stack in stacks)


def test_a_pipelined_burst_gives_the_loop_back_after_each_slice():
    # 20 requests queued on one connection, each holding the loop for at least 1 ms: run straight,
    # they would keep every other connection waiting for their sum. In slices of BURST_SLICE_S
    # (2 ms: at most 4 such requests each) the ticker gets a turn between slices.
    handled = []

    class Slot:
        order_released = False

    async def handle(frame, size, slot, received):
        time.sleep(0.001)
        handled.append(frame)
        slot.order_released = frame == 19   # the last one ends the runner, so the job returns

    conn = Connection.__new__(Connection)
    conn._queue = collections.deque((i, 0, Slot(), 0.0) for i in range(20))
    conn._handle = handle
    conn._write_now_or_wake = lambda: None
    conn._runner_idle = None

    _, turns = trio.run(_with_ticker, conn._run_queue)
    assert handled == list(range(20))
    # at least 5 slices, 4 turns between them; the last turn may fall after the job returned
    assert turns >= 3
