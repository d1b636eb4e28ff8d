"""Scenario 18: FastStream applications on both of its Kafka backends, in process, over a real socket.

Each scenario runs once on ``faststream.kafka`` (aiokafka inside) and once on ``faststream.confluent``
(confluent-kafka inside), with FastStream's own broker object (``async with broker``), not its CLI:

- a publisher and a subscriber in a consumer group: keys, headers and JSON bodies come back as sent, one
  key stays on one partition, the handler's return value goes to its ``@publisher`` topic carrying the
  request's correlation id, and the group's committed offsets reach the end of the log;
- RPC the Kafka way: a message with ``reply_to`` gets the handler's answer on that topic (FastStream's
  ``broker.request`` works only with its test client on Kafka, so a second subscriber reads the reply);
- ``publish_batch`` (zstd, idempotent producer) and a batch subscriber: every message, in order, in
  batches of more than one;
- manual ack (at-least-once): what was not acked is delivered again after the application restarts, and
  a nack rewinds the partition to redeliver in the same run;
- two applications in one group split the partitions between them, each partition read by one only;
- static members (``group_instance_id``): one restarts and gets its own partition back, no rebalance.

FastStream declares the topics it subscribes to (``Topic(name, num_partitions=...)``: CreateTopics).
Skips unless faststream is importable (``pip install 'faststream[kafka,confluent]'``).
No ``from __future__ import annotations`` here: FastStream reads the handlers' annotations at decoration.
"""

import asyncio
import importlib
import json
import logging
import time

import pytest

pytest.importorskip("faststream", reason="needs faststream: pip install 'faststream[kafka,confluent]'")

from faststream import AckPolicy, Context  # noqa: E402

BACKENDS = ["kafka", "confluent"]   # faststream.kafka: aiokafka; faststream.confluent: confluent-kafka
WAIT = 30   # seconds any one step may take before the scenario fails
LOG = logging.getLogger("compat.faststream")


@pytest.fixture(params=BACKENDS)
def faststream_kafka(request):
    """The FastStream backend module (faststream.kafka or faststream.confluent)."""
    return importlib.import_module(f"faststream.{request.param}")


@pytest.fixture(autouse=True)
def topics_declared(caplog):
    """FastStream only logs a topic it could not declare (CreateTopics answered an error other than
    TOPIC_ALREADY_EXISTS) and carries on; here that fails the scenario."""
    yield
    failed = [r.getMessage() for r in caplog.get_records("call") if "Failed to create topic" in r.getMessage()]
    assert not failed, failed


def run(scenario, timeout: float = 90):
    """Runs an async scenario to completion on a fresh event loop, bounded."""
    return asyncio.run(asyncio.wait_for(scenario(), timeout))


async def arrive(what: str, items: list, count: int, timeout: float = WAIT) -> list:
    """Waits until `items` holds `count` entries; fails naming what did not come."""
    deadline = time.monotonic() + timeout
    while len(items) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {len(items)} of {count} arrived within {timeout}s: {items}")
        await asyncio.sleep(0.05)
    return items


def key_and_partition(raw) -> tuple[bytes, int]:
    """The key and partition of a record as either backend hands it over (aiokafka or confluent-kafka)."""
    if callable(getattr(raw, "key", None)):
        return raw.key(), raw.partition()
    return raw.key, raw.partition


def new_broker(faststream_kafka, helper, **options):
    # A list: aiokafka reads one string as a single host:port, even with commas (COMPAT_CLUSTER=3).
    # A logger of ours: FastStream's own do not propagate, so pytest (topics_declared) would not see them.
    return faststream_kafka.KafkaBroker(helper.bootstrap.split(","), logger=LOG, **options)


def test_publish_subscribe_in_a_group(faststream_kafka, helper, names):
    topic, out, group = names("orders"), names("totals"), names("fs")
    broker = new_broker(faststream_kafka, helper)
    seen = []

    @broker.subscriber(faststream_kafka.Topic(topic, num_partitions=3), group_id=group,
                       auto_offset_reset="earliest")
    @broker.publisher(out)
    async def handle(body: dict, message=Context("message")):
        key, partition = key_and_partition(message.raw_message)
        seen.append((key, body, message.headers.get("trace"), partition, message.correlation_id))
        return {"order": body["order"], "total": body["qty"] * body["price"]}

    sent = [(f"customer-{n % 4}".encode(), {"order": n, "qty": n % 3 + 1, "price": 10 + n}, f"t-{n}")
            for n in range(24)]

    async def scenario():
        async with broker:
            await broker.start()
            assert await broker.ping(timeout=10)
            publisher = broker.publisher(topic)
            for key, body, trace in sent:
                await publisher.publish(body, key=key, headers={"trace": trace}, correlation_id=f"c-{body['order']}")
            await arrive("orders", seen, len(sent))
    run(scenario)

    assert sorted((k, b["order"], b, t) for k, b, t, *_ in seen) == sorted((k, b["order"], b, t) for k, b, t in sent)
    partitions_of = {}
    for key, _, _, partition, _ in seen:
        partitions_of.setdefault(key, set()).add(partition)
    assert all(len(p) == 1 for p in partitions_of.values()), partitions_of
    assert {cid for *_, cid in seen} == {f"c-{n}" for n in range(len(sent))}

    totals = helper.consume(out, timeout=10)
    assert sorted(json.loads(r.value)["order"] for r in totals) == list(range(len(sent)))
    for record in totals:
        reply, headers = json.loads(record.value), dict(record.headers)
        body = sent[reply["order"]][1]
        assert reply["total"] == body["qty"] * body["price"]
        assert headers["correlation_id"] == f"c-{reply['order']}".encode(), headers
        assert headers["content-type"] == b"application/json", headers

    assert helper.partition_count(topic) == 3
    ends = helper.list_offsets(topic, range(3))
    assert helper.group_offsets(group) == {(topic, p): ends[p][1] for p in range(3) if ends[p][1]}


def test_reply_to(faststream_kafka, helper, names):
    requests, replies, group = names("requests"), names("replies"), names("fs")
    broker = new_broker(faststream_kafka, helper)
    answers = []

    @broker.subscriber(faststream_kafka.Topic(requests), group_id=group, auto_offset_reset="earliest")
    async def square(body: dict) -> dict:
        return {"n": body["n"], "square": body["n"] ** 2}

    @broker.subscriber(faststream_kafka.Topic(replies), group_id=f"{group}-caller", auto_offset_reset="earliest")
    async def caller(body: dict, message=Context("message")):
        answers.append((message.correlation_id, body))

    async def scenario():
        async with broker:
            await broker.start()
            for n in range(5):
                await broker.publish({"n": n}, requests, reply_to=replies, correlation_id=f"rpc-{n}")
            await arrive("replies", answers, 5)
    run(scenario)
    assert sorted(answers) == [(f"rpc-{n}", {"n": n, "square": n * n}) for n in range(5)]


def test_batch_publish_and_batch_subscriber(faststream_kafka, helper, names):
    topic, group = names("batch"), names("fs")
    broker = new_broker(faststream_kafka, helper, compression_type="zstd", enable_idempotence=True, acks="all")
    batches = []
    got = []

    @broker.subscriber(faststream_kafka.Topic(topic), group_id=group, auto_offset_reset="earliest",
                       batch=True, max_records=20)
    async def handle(bodies: list[dict]):
        batches.append(len(bodies))
        got.extend(body["n"] for body in bodies)

    async def scenario():
        async with broker:
            await broker.start()
            for start in range(0, 60, 15):
                await broker.publish_batch(*({"n": n} for n in range(start, start + 15)), topic=topic)
            await arrive("batched messages", got, 60)
    run(scenario)
    assert got == list(range(60))
    assert max(batches) > 1 and max(batches) <= 20, batches
    assert [json.loads(r.value)["n"] for r in helper.consume(topic, timeout=10)] == list(range(60))


def test_manual_ack_redelivers_what_was_not_acked(faststream_kafka, helper, names):
    topic, group = names("jobs"), names("fs")
    first_run, second_run = [], []

    def app(handled, decide):
        broker = new_broker(faststream_kafka, helper)

        @broker.subscriber(faststream_kafka.Topic(topic), group_id=group, auto_offset_reset="earliest",
                           ack_policy=AckPolicy.MANUAL)
        async def handle(body: dict, message=Context("message")):
            handled.append(body["n"])
            await decide(body["n"], message)
        return broker

    async def ack_first_three(n, message):
        if n < 3:
            await message.ack()

    nacked = set()

    async def nack_four_once(n, message):
        if n == 4 and n not in nacked:
            nacked.add(n)
            await message.nack()
        else:
            await message.ack()

    async def committed_reaches(offset):
        """Waits for the group's commit (confluent-kafka's ack commits asynchronously)."""
        deadline = time.monotonic() + WAIT
        while (committed := await asyncio.to_thread(helper.committed, group, topic, [0])) != {0: (offset, None)}:
            assert time.monotonic() < deadline, f"committed {committed}, not {offset}"
            await asyncio.sleep(0.1)

    async def scenario():
        async with app(first_run, ack_first_three) as broker:
            await broker.start()
            for n in range(3):
                await broker.publish({"n": n}, topic)
            await arrive("acked", first_run, 3)
            await committed_reaches(3)
            for n in range(3, 6):
                await broker.publish({"n": n}, topic)
            await arrive("not acked", first_run, 6)
        assert helper.committed(group, topic, [0]) == {0: (3, None)}
        async with app(second_run, nack_four_once) as broker:   # the same group, restarted
            await broker.start()
            await arrive("second run", second_run, 4)
            await committed_reaches(6)
    run(scenario)

    assert first_run == list(range(6))
    assert second_run == [3, 4, 4, 5]   # from the last ack; the nack rewound to 4 once
    assert helper.committed(group, topic, [0]) == {0: (6, None)}


def group_members(helper, group) -> list[tuple]:
    """(group.instance.id, partitions) of each member, as DescribeGroups answers."""
    (future,) = helper.admin.describe_consumer_groups([group], request_timeout=10).values()
    return sorted((m.group_instance_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                  for m in future.result().members)


def test_static_members_keep_their_partitions(faststream_kafka, helper, names):
    topic, group = names("static"), names("fs")
    helper.create_topic(topic, 2)
    got = []

    def app(instance):
        broker = new_broker(faststream_kafka, helper)

        @broker.subscriber(topic, group_id=group, group_instance_id=instance, auto_offset_reset="earliest",
                           heartbeat_interval_ms=500, session_timeout_ms=10000)
        async def handle(body: dict, message=Context("message")):
            got.append((instance, key_and_partition(message.raw_message)[1], body["n"]))
        return broker

    async def assignment(want, who):
        deadline = time.monotonic() + WAIT
        while (members := await asyncio.to_thread(group_members, helper, group)) not in want:
            assert time.monotonic() < deadline, f"{who}: {members}"
            await asyncio.sleep(0.2)
        return members

    split = ([("one", [0]), ("two", [1])], [("one", [1]), ("two", [0])])

    async def scenario():
        async with app("two") as two:
            await two.start()
            async with app("one") as one:
                await one.start()
                before = await assignment(split, "two static members")
                for n in range(10):
                    await one.publish({"n": n}, topic, partition=n % 2)
                await arrive("first round", got, 10)
            # a static member leaves no gap: its partition waits for it until its session times out
            assert await asyncio.to_thread(group_members, helper, group) == before
            async with app("one") as one:
                await one.start()
                assert await assignment([before], "rejoined") == before
                for n in range(10, 14):
                    await one.publish({"n": n}, topic, partition=n % 2)
                await arrive("second round", got, 14)
        return dict(before)
    assigned = run(scenario)
    assert sorted(n for *_, n in got) == list(range(14))
    assert all([partition] == assigned[instance] for instance, partition, _ in got), got


def test_two_subscribers_split_partitions(faststream_kafka, helper, names):
    topic, group, partitions = names("split"), names("fs"), 4
    helper.create_topic(topic, partitions)
    got = {"a": [], "b": []}

    def app(name):
        broker = new_broker(faststream_kafka, helper)

        @broker.subscriber(topic, group_id=group, auto_offset_reset="earliest", heartbeat_interval_ms=500)
        async def handle(body: dict, message=Context("message")):
            got[name].append((key_and_partition(message.raw_message)[1], body["n"]))
        return broker

    def members():
        return sorted(partitions for _, partitions in group_members(helper, group))

    async def scenario():
        async with app("a") as a, app("b") as b:
            await a.start()
            await b.start()
            deadline = time.monotonic() + WAIT
            while (assigned := await asyncio.to_thread(members)) != [[0, 1], [2, 3]] and assigned != [[0, 2], [1, 3]]:
                assert time.monotonic() < deadline, f"group never split the partitions: {assigned}"
                await asyncio.sleep(0.2)
            for n in range(40):
                await a.publish({"n": n}, topic, partition=n % partitions)
            while len(got["a"]) + len(got["b"]) < 40:
                assert time.monotonic() < deadline + WAIT, got
                await asyncio.sleep(0.05)
        return assigned
    assigned = run(scenario)

    read_by = {name: {p for p, _ in records} for name, records in got.items()}
    assert sorted(sorted(parts) for parts in read_by.values()) == assigned
    assert sorted(n for records in got.values() for _, n in records) == list(range(40))
    assert all(p == n % partitions for records in got.values() for p, n in records)
