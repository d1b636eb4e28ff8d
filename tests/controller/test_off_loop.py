"""Bulk metadata changes (thousands of partitions in one CreateTopics, a snapshot of a large image) are
encoded, decoded and applied in worker threads, not on the event loop, where they held it for
100-200 ms at 50,000 partitions; small changes stay inline (no thread trip on the ISR-change path).
Checked by which thread the record codec ran on, and by the image before and after a restart. And
planning thousands of partitions gives the loop turns in between."""

import threading
import uuid

import trio

from broker.controller import Controller, CreateTopicSpec
from broker.controller import records as r

TOPICS, PER_TOPIC = 20, 100   # 2,020 records, ~100 KB: past both bulk bounds


async def test_a_bulk_create_and_its_snapshot_are_worked_out_off_the_event_loop(tmp_path, monkeypatch):
    loop_thread = threading.current_thread()
    calls, everything = [], []   # (what, records, ran on the event loop's thread)
    encode, decode = r.encode_records, r.decode_records

    def encode_records(records):
        records = list(records)
        calls.append(("encode", len(records), threading.current_thread() is loop_thread))
        everything.append(calls[-1])
        return encode(records)

    def decode_records(data):
        records = decode(data)
        calls.append(("decode", len(records), threading.current_thread() is loop_thread))
        everything.append(calls[-1])
        return records

    monkeypatch.setattr(r, "encode_records", encode_records)
    monkeypatch.setattr(r, "decode_records", decode_records)
    bulk = [CreateTopicSpec(f"bulk-{t}", PER_TOPIC, 1) for t in range(TOPICS)]

    async with Controller.open(str(tmp_path), snapshot_every=4) as controller:
        epoch = await controller.register_broker(1, uuid.UUID(int=7), [("PLAINTEXT", "localhost", 9092, 0)])
        await controller.heartbeat(1, epoch, controller.image.offset)
        calls.clear()
        results = await controller.create_topics(bulk)
        assert [res.error_code for res in results] == [0] * TOPICS
        records = TOPICS * (1 + PER_TOPIC)
        assert ("encode", records, False) in calls and ("decode", records, False) in calls
        assert not [call for call in calls if call[1] >= records and call[2]]

        calls.clear()
        [small] = await controller.create_topics([CreateTopicSpec("small", 1, 1)])
        assert small.error_code == 0
        assert ("encode", 2, True) in calls and ("decode", 2, True) in calls
        # a few more entries make a snapshot: the whole image, encoded off the loop too
        last = []
        while len(last) < 4 and not [c for c in everything if c[0] == "encode" and c[1] > records]:
            last.append(f"last-{len(last)}")
            await controller.create_topics([CreateTopicSpec(last[-1], 1, 1)])
        snapshots = [call for call in everything if call[0] == "encode" and call[1] > records]
        assert snapshots and not [call for call in snapshots if call[2]]
        image = controller.image
        assert sorted(image.topics) == sorted([s.name for s in bulk] + ["small"] + last)
        assert all(len(image.topics[s.name].partitions) == PER_TOPIC for s in bulk)
        leaders = {(t, p): part.leader for t, topic in image.topics.items()
                   for p, part in topic.partitions.items()}

    async with Controller.open(str(tmp_path)) as controller:   # replayed from the snapshot and log
        again = {(t, p): part.leader for t, topic in controller.image.topics.items()
                 for p, part in topic.partitions.items()}
        assert again == leaders


async def test_planning_thousands_of_partitions_gives_the_loop_turns(tmp_path, monkeypatch):
    turns, planned_at = 0, []   # the ticker's turns when each topic's records were planned

    async def ticker():
        nonlocal turns
        while True:
            await trio.lowlevel.checkpoint()
            turns += 1

    plan = Controller._create_topic_records

    def planning(self, spec, *args, **kwargs):
        planned_at.append(turns)
        return plan(self, spec, *args, **kwargs)

    monkeypatch.setattr(Controller, "_create_topic_records", planning)
    async with Controller.open(str(tmp_path)) as controller:
        epoch = await controller.register_broker(1, uuid.UUID(int=7), [("PLAINTEXT", "localhost", 9092, 0)])
        await controller.heartbeat(1, epoch, controller.image.offset)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            results = await controller.create_topics([CreateTopicSpec(f"t{i}", 500, 1) for i in range(6)])
            nursery.cancel_scope.cancel()
        assert [res.error_code for res in results] == [0] * 6
        assert sum(len(controller.image.topics[f"t{i}"].partitions) for i in range(6)) == 3000
    # 501 records a topic, a turn after each ~1,000: planned in three slices. (Trio runs the ticker
    # before or after the planner within a scheduler batch, at random: so only from the third slice
    # on is a turn of the ticker certain to have been counted.)
    assert planned_at[0] == planned_at[1] <= planned_at[2] == planned_at[3] <= planned_at[4] == planned_at[5]
    assert planned_at[0] < planned_at[4]
