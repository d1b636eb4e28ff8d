"""aiokafka (InitProducerId v0, its own group and transaction code) against an in-process broker."""

import asyncio

import pytest

from broker.testing import running_broker

aiokafka = pytest.importorskip("aiokafka")


async def scenario(bootstrap):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic("aio", 2, 1)])
    await admin.close()

    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    for i in range(20):
        await producer.send_and_wait("aio", b"%d" % i, partition=i % 2)
    await producer.stop()

    tx = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-tx")
    await tx.start()
    async with tx.transaction():
        await tx.send("aio", b"committed", partition=0)
    await tx.begin_transaction()
    await tx.send("aio", b"aborted", partition=0)
    await tx.abort_transaction()
    await tx.stop()

    consumer = aiokafka.AIOKafkaConsumer("aio", bootstrap_servers=bootstrap, group_id="aio-group",
                                         auto_offset_reset="earliest", enable_auto_commit=False,
                                         isolation_level="read_committed", heartbeat_interval_ms=300)
    await consumer.start()
    values = []
    try:
        async with asyncio.timeout(20):
            while len(values) < 21:
                batch = await consumer.getmany(timeout_ms=500)
                values.extend(m.value for msgs in batch.values() for m in msgs)
        await consumer.commit()
        committed = [await consumer.committed(aiokafka.TopicPartition("aio", p)) for p in range(2)]
    finally:
        await consumer.stop()
    return values, committed


@pytest.mark.timeout(60)
def test_aiokafka_idempotent_transactional_and_group(tmp_path):
    with running_broker(tmp_path / "data") as broker:
        values, committed = asyncio.run(scenario(broker.bootstrap))
    assert sorted(values) == sorted([b"%d" % i for i in range(20)] + [b"committed"])
    # partition 0: ten records, the committed one and its marker, the aborted one and its marker
    assert committed == [14, 10]
