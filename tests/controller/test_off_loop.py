"""Bulk metadata changes (thousands of partitions in one CreateTopics, a snapshot of a large image) are
encoded, decoded and applied in worker threads, not on the event loop, where they held it for
100-200 ms at 50,000 partitions; small changes stay inline (no thread trip on the ISR-change path).
Checked by which thread the record codec ran on, and by the image before and after a restart."""

import threading
import uuid

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
        # enough entries by now for a snapshot: the whole image, encoded off the loop too
        await controller.create_topics([CreateTopicSpec("last", 1, 1)])
        snapshots = [call for call in everything if call[0] == "encode" and call[1] > records]
        assert snapshots and not [call for call in snapshots if call[2]]
        image = controller.image
        assert sorted(image.topics) == sorted([s.name for s in bulk] + ["small", "last"])
        assert all(len(image.topics[s.name].partitions) == PER_TOPIC for s in bulk)
        leaders = {(t, p): part.leader for t, topic in image.topics.items()
                   for p, part in topic.partitions.items()}

    async with Controller.open(str(tmp_path)) as controller:   # replayed from the snapshot and log
        again = {(t, p): part.leader for t, topic in controller.image.topics.items()
                 for p, part in topic.partitions.items()}
        assert again == leaders
