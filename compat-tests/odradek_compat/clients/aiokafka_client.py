"""aiokafka, driven from a private asyncio loop on its own thread (so group members live across calls)."""

from __future__ import annotations

import asyncio
import threading
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, for_code
from aiokafka.structs import OffsetAndMetadata

from ..records import Rec
from .base import Client, ClientError, Delivery, PollResult, Unsupported

API_TIMEOUT_MS = 30000


def _rec(msg) -> Rec:
    return Rec(key=msg.key, value=msg.value, headers=list(msg.headers or []), partition=msg.partition,
               timestamp=msg.timestamp, offset=msg.offset)


def _check(code: int, what: str) -> None:
    if code:
        raise ClientError(f"{what}: {for_code(code).__name__}")


class _Member(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.consumer: AIOKafkaConsumer | None = None
        self.assigned_events = 0
        self.revoked_events = 0

    async def on_partitions_revoked(self, revoked):
        if revoked:
            self.revoked_events += 1

    async def on_partitions_assigned(self, assigned):
        self.assigned_events += 1


class AiokafkaClient(Client):
    name = "aiokafka"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="aiokafka-loop")
        self.thread.start()
        self._admin = None

    def run(self, coro, timeout: float = 90):
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except KafkaError as e:
            raise ClientError(f"{type(e).__name__}: {e}") from None
        except TimeoutError:
            future.cancel()
            raise

    def close(self):
        if self._admin is not None:
            self.run(self._admin.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def admin(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=API_TIMEOUT_MS)
            await admin.start()
            self._admin = admin
        return self._admin

    # -- admin --
    def metadata(self):
        async def go():
            admin = await self.admin()
            c = await admin.describe_cluster()
            return {"cluster_id": c["cluster_id"], "controller_id": c["controller_id"],
                    "brokers": [{"id": b["node_id"], "host": b["host"], "port": b["port"]} for b in c["brokers"]],
                    "topics": sorted(await admin.list_topics())}
        return self.run(go())

    def create_topic(self, topic, partitions, configs=None):
        async def go():
            resp = await (await self.admin()).create_topics(
                [NewTopic(topic, partitions, 1, topic_configs=dict(configs or {}))], timeout_ms=API_TIMEOUT_MS)
            for t in resp.topic_errors:
                _check(t[1], f"create {t[0]}")
        self.run(go())

    def partition_count(self, topic):
        async def go():
            (desc,) = await (await self.admin()).describe_topics([topic])
            _check(desc["error_code"], f"describe {topic}")
            return len(desc["partitions"])
        return self.run(go())

    def describe_configs(self, topic):
        async def go():
            (resp,) = await (await self.admin()).describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic)])
            (resource,) = resp.resources
            _check(resource[0], f"describe configs {topic}")
            return {entry[0]: entry[1] for entry in resource[4]}
        return self.run(go())

    def create_partitions(self, topic, total):
        async def go():
            resp = await (await self.admin()).create_partitions({topic: NewPartitions(total)},
                                                                 timeout_ms=API_TIMEOUT_MS)
            for t in resp.topic_errors:
                _check(t[1], f"create partitions {t[0]}")
        self.run(go())

    def delete_topic(self, topic):
        async def go():
            resp = await (await self.admin()).delete_topics([topic], timeout_ms=API_TIMEOUT_MS)
            for t in resp.topic_error_codes:
                _check(t[1], f"delete {t[0]}")
        self.run(go())

    # -- produce / consume --
    def produce(self, topic, records, *, acks="all", compression="none", idempotent=None, linger_ms=5, timeout=60):
        if any(r.key is None and r.value is None for r in records):
            raise Unsupported("aiokafka's send() refuses a record with neither key nor value")

        async def go():
            config = {"bootstrap_servers": self.bootstrap, "acks": acks if acks == "all" else int(acks),
                      "compression_type": None if compression == "none" else compression,
                      "linger_ms": linger_ms, "request_timeout_ms": 15000}
            if idempotent:
                config["enable_idempotence"] = True
            producer = AIOKafkaProducer(**config)
            await producer.start()
            try:
                futures = []
                for rec in records:
                    try:
                        futures.append(await producer.send(
                            topic, key=rec.key, value=rec.value, headers=rec.headers,
                            partition=rec.partition, timestamp_ms=rec.timestamp))
                    except KafkaError as e:  # e.g. MessageSizeTooLargeError raised before sending
                        futures.append(e)
                deliveries = []
                for f in futures:
                    if isinstance(f, KafkaError):
                        deliveries.append(Delivery(error=f"{type(f).__name__}: {f}"))
                        continue
                    try:
                        md = await asyncio.wait_for(f, timeout)
                        if md is None:  # acks=0: aiokafka resolves without metadata
                            deliveries.append(Delivery())
                        else:
                            deliveries.append(Delivery(md.partition, md.offset if acks != "0" and md.offset >= 0 else None))
                    except KafkaError as e:
                        deliveries.append(Delivery(error=f"{type(e).__name__}: {e}"))
                return deliveries
            finally:
                await producer.stop()
        return self.run(go(), timeout + 30)

    async def _consumer(self, **extra) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                    request_timeout_ms=API_TIMEOUT_MS, **extra)
        await consumer.start()
        return consumer

    async def _partitions(self, topic, partitions):
        if partitions is not None:
            return partitions
        (desc,) = await (await self.admin()).describe_topics([topic])
        _check(desc["error_code"], f"describe {topic}")
        return sorted(p["partition"] for p in desc["partitions"])

    def consume(self, topic, *, partitions=None, start=None, isolation="read_uncommitted", timeout=30):
        async def go():
            consumer = await self._consumer(isolation_level=isolation)
            try:
                tps = [TopicPartition(topic, p) for p in await self._partitions(topic, partitions)]
                consumer.assign(tps)
                end = await consumer.end_offsets(tps)
                # explicit offsets: seek_to_beginning right after assign() can lose to the pending reset
                begin = await consumer.beginning_offsets(tps) if start is None else {}
                for tp in tps:
                    consumer.seek(tp, begin[tp] if start is None else start[tp.partition])
                records = []
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    positions = [await consumer.position(tp) for tp in tps]
                    if all(pos >= end[tp] for pos, tp in zip(positions, tps)):
                        break
                    for tp, msgs in (await consumer.getmany(timeout_ms=200)).items():
                        records.extend(_rec(m) for m in msgs if m.offset < end[tp])
                return records
            finally:
                await consumer.stop()
        return self.run(go(), timeout + 30)

    def offsets_for_times(self, topic, partition, timestamps):
        async def go():
            consumer = await self._consumer()
            try:
                tp = TopicPartition(topic, partition)
                out = []
                for ts in timestamps:
                    found = (await consumer.offsets_for_times({tp: ts}))[tp]
                    out.append(None if found is None else found.offset)
                return out
            finally:
                await consumer.stop()
        return self.run(go())

    def list_offsets(self, topic, partitions):
        async def go():
            consumer = await self._consumer()
            try:
                tps = [TopicPartition(topic, p) for p in partitions]
                begin = await consumer.beginning_offsets(tps)
                end = await consumer.end_offsets(tps)
                return {tp.partition: (begin[tp], end[tp]) for tp in tps}
            finally:
                await consumer.stop()
        return self.run(go())

    def commit(self, group, topic, offsets):
        async def go():
            consumer = await self._consumer(group_id=group)
            try:
                tps = [TopicPartition(topic, p) for p in offsets]
                consumer.assign(tps)
                await consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, m)
                                       for p, (o, m) in offsets.items()})
            finally:
                await consumer.stop()
        self.run(go())

    def committed(self, group, topic, partitions):
        async def go():
            admin = await self.admin()
            answer = await admin.list_consumer_group_offsets(
                group, partitions=[TopicPartition(topic, p) for p in partitions])
            out = {p: None for p in partitions}
            for tp, om in answer.items():
                if om.offset >= 0:
                    out[tp.partition] = (om.offset, om.metadata)
            return out
        return self.run(go())

    def group_offsets(self, group):
        async def go():
            answer = await (await self.admin()).list_consumer_group_offsets(group)
            return {(tp.topic, tp.partition): om.offset for tp, om in answer.items() if om.offset >= 0}
        return self.run(go())

    # -- groups --
    def group_open(self, group, topic, *, instance_id=None, assignor="range", session_timeout_ms=10000):
        if assignor != "range":
            raise Unsupported(f"aiokafka has no {assignor} assignor")
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor

        async def go():
            member = _Member()
            member.consumer = await self._consumer(
                group_id=group, group_instance_id=instance_id, auto_offset_reset="earliest",
                partition_assignment_strategy=(RangePartitionAssignor,),
                session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=1000)
            member.consumer.subscribe([topic], listener=member)
            return member
        return self.run(go())

    def group_poll(self, member, timeout_ms=200):
        async def go():
            polled = await member.consumer.getmany(timeout_ms=timeout_ms)
            records = [_rec(m) for msgs in polled.values() for m in msgs]
            return PollResult(records, sorted(tp.partition for tp in member.consumer.assignment()),
                              member.assigned_events, member.revoked_events)
        return self.run(go())

    def group_commit(self, member):
        self.run(member.consumer.commit())

    def group_close(self, member):
        self.run(member.consumer.stop())

    # -- transactions --
    def txn_produce(self, topic, transactional_id, batches):
        async def go():
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=transactional_id,
                                        transaction_timeout_ms=60000)
            await producer.start()
            try:
                for recs, commit in batches:
                    await producer.begin_transaction()
                    for rec in recs:
                        await producer.send(topic, key=rec.key, value=rec.value, headers=rec.headers,
                                            partition=rec.partition)
                    if commit:
                        await producer.commit_transaction()
                    else:
                        await producer.abort_transaction()
            finally:
                await producer.stop()
        self.run(go(), 120)

    def txn_open(self, topic, transactional_id, records):
        async def go():
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=transactional_id,
                                        transaction_timeout_ms=60000)
            await producer.start()
            await producer.begin_transaction()
            futures = [await producer.send(topic, key=r.key, value=r.value, headers=r.headers,
                                           partition=r.partition) for r in records]
            await asyncio.gather(*futures)
            return producer
        return self.run(go())

    def txn_close(self, handle, commit):
        async def go():
            try:
                await (handle.commit_transaction() if commit else handle.abort_transaction())
            finally:
                await handle.stop()
        self.run(go())

    def consume_transform_produce(self, in_topic, out_topic, group, transactional_id, count, timeout=60):
        async def go():
            consumer = await self._consumer(group_id=group, auto_offset_reset="earliest",
                                            isolation_level="read_committed")
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=transactional_id,
                                        transaction_timeout_ms=60000)
            await producer.start()
            done = 0
            try:
                consumer.subscribe([in_topic])
                deadline = time.monotonic() + timeout
                while done < count and time.monotonic() < deadline:
                    polled = await consumer.getmany(timeout_ms=200)
                    if not polled:
                        continue
                    async with producer.transaction():
                        offsets = {}
                        for tp, msgs in polled.items():
                            for m in msgs:
                                await producer.send(out_topic, key=m.key,
                                                    value=None if m.value is None else m.value.upper())
                                done += 1
                            offsets[tp] = msgs[-1].offset + 1
                        await producer.send_offsets_to_transaction(offsets, group)
                return done
            finally:
                await consumer.stop()
                await producer.stop()
        return self.run(go(), timeout + 30)
