"""librdkafka through confluent-kafka (Python)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, ResourceType

from ..records import Rec
from .base import Client, ClientError, Delivery, PollResult

API_TIMEOUT = 30


def _result(future):
    try:
        return future.result(timeout=API_TIMEOUT)
    except KafkaException as e:
        raise ClientError(str(e.args[0])) from None


def _rec(msg) -> Rec:
    return Rec(key=msg.key(), value=msg.value(), headers=list(msg.headers() or []),
               partition=msg.partition(), timestamp=msg.timestamp()[1], offset=msg.offset())


class ConfluentClient(Client):
    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self._admin = None

    def close(self) -> None:
        self._admin = None  # librdkafka destroys the handle with the object: no reconnect noise afterwards

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def metadata(self):
        cluster = _result(self.admin.describe_cluster(request_timeout=API_TIMEOUT))
        topics = self.admin.list_topics(timeout=API_TIMEOUT).topics
        return {"cluster_id": cluster.cluster_id,
                "controller_id": cluster.controller.id if cluster.controller else None,
                "brokers": [{"id": n.id, "host": n.host, "port": n.port} for n in cluster.nodes],
                "topics": sorted(topics)}

    def create_topic(self, topic, partitions, configs=None):
        fs = self.admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                                config=dict(configs or {}))], request_timeout=API_TIMEOUT)
        _result(fs[topic])

    def partition_count(self, topic):
        md = self.admin.list_topics(topic=topic, timeout=API_TIMEOUT).topics[topic]
        if md.error is not None:
            raise ClientError(str(md.error))
        return len(md.partitions)

    def describe_configs(self, topic):
        res = ConfigResource(ResourceType.TOPIC, topic)
        entries = _result(self.admin.describe_configs([res], request_timeout=API_TIMEOUT)[res])
        return {name: e.value for name, e in entries.items()}

    def create_partitions(self, topic, total):
        _result(self.admin.create_partitions([NewPartitions(topic, total)], request_timeout=API_TIMEOUT)[topic])

    def delete_topic(self, topic):
        _result(self.admin.delete_topics([topic], request_timeout=API_TIMEOUT)[topic])

    def produce(self, topic, records, *, acks="all", compression="none", idempotent=None, linger_ms=5, timeout=60):
        config = {"bootstrap.servers": self.bootstrap, "acks": acks, "compression.type": compression,
                  "linger.ms": linger_ms, "message.timeout.ms": int(timeout * 1000) - 5000}
        if idempotent is not None:
            config["enable.idempotence"] = idempotent
        producer = Producer(config)
        deliveries = [Delivery() for _ in records]

        def report(slot):
            def on_delivery(err, msg):
                if err is not None:
                    slot.error = f"{err.name()}: {err.str()}"
                else:
                    slot.partition, slot.offset = msg.partition(), msg.offset()
                    if acks == "0":
                        slot.offset = None  # librdkafka reports -1001 (unknown) for acks=0
            return on_delivery

        for rec, slot in zip(records, deliveries):
            kwargs = {"key": rec.key, "value": rec.value, "headers": rec.headers or None, "on_delivery": report(slot)}
            if rec.partition is not None:
                kwargs["partition"] = rec.partition
            if rec.timestamp is not None:
                kwargs["timestamp"] = rec.timestamp
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
                except KafkaException as e:  # e.g. MSG_SIZE_TOO_LARGE raised before sending
                    slot.error = f"{e.args[0].name()}: {e.args[0].str()}"
                    break
        remaining = producer.flush(timeout)
        if remaining:
            raise ClientError(f"{remaining} records still undelivered after {timeout}s")
        return deliveries

    def _consumer(self, extra: dict | None = None) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"compat-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, **(extra or {})})

    def _partitions(self, consumer, topic, partitions):
        if partitions is not None:
            return partitions
        md = consumer.list_topics(topic, timeout=API_TIMEOUT).topics[topic]
        return sorted(md.partitions)

    def consume(self, topic, *, partitions=None, start=None, isolation="read_uncommitted", timeout=30):
        consumer = self._consumer({"isolation.level": isolation, "enable.partition.eof": True})
        try:
            parts = self._partitions(consumer, topic, partitions)
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING if start is None else start[p])
                             for p in parts])
            pending = set(parts)
            records = []
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(500, timeout=0.2):
                    if msg.error() is None:
                        records.append(_rec(msg))
                    elif msg.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    else:
                        raise ClientError(str(msg.error()))
            return records
        finally:
            consumer.close()

    def offsets_for_times(self, topic, partition, timestamps):
        consumer = self._consumer()
        try:
            out = []
            for ts in timestamps:
                (tp,) = consumer.offsets_for_times([TopicPartition(topic, partition, ts)], timeout=API_TIMEOUT)
                if tp.error is not None:
                    raise ClientError(str(tp.error))
                out.append(None if tp.offset < 0 else tp.offset)
            return out
        finally:
            consumer.close()

    def list_offsets(self, topic, partitions):
        consumer = self._consumer()
        try:
            return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=API_TIMEOUT)
                    for p in partitions}
        finally:
            consumer.close()

    def commit(self, group, topic, offsets):
        consumer = self._consumer({"group.id": group})
        try:
            consumer.commit(offsets=[TopicPartition(topic, p, o, metadata=m) for p, (o, m) in offsets.items()],
                            asynchronous=False)
        finally:
            consumer.close()

    def committed(self, group, topic, partitions):
        consumer = self._consumer({"group.id": group})
        try:
            tps = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=API_TIMEOUT)
            return {tp.partition: (None if tp.offset < 0 else (tp.offset, tp.metadata)) for tp in tps}
        finally:
            consumer.close()

    def group_offsets(self, group):
        from confluent_kafka import ConsumerGroupTopicPartitions
        (future,) = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                          request_timeout=API_TIMEOUT).values()
        answer = _result(future)
        return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}

    # -- groups --
    class Member:
        def __init__(self, consumer):
            self.consumer = consumer
            self.assigned_events = 0
            self.revoked_events = 0

    def group_open(self, group, topic, *, instance_id=None, assignor="range", session_timeout_ms=10000):
        config = {"group.id": group, "auto.offset.reset": "earliest",
                  "partition.assignment.strategy": assignor, "session.timeout.ms": session_timeout_ms,
                  "heartbeat.interval.ms": 1000}
        if instance_id is not None:
            config["group.instance.id"] = instance_id
        member = self.Member(self._consumer(config))

        def on_assign(consumer, partitions):
            member.assigned_events += 1

        def on_revoke(consumer, partitions):
            if partitions:
                member.revoked_events += 1

        member.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        return member

    def group_poll(self, member, timeout_ms=200):
        msgs = member.consumer.consume(500, timeout=timeout_ms / 1000)
        records = []
        for msg in msgs:
            if msg.error() is not None:
                raise ClientError(str(msg.error()))
            records.append(_rec(msg))
        return PollResult(records, sorted(tp.partition for tp in member.consumer.assignment()),
                          member.assigned_events, member.revoked_events)

    def group_commit(self, member):
        try:
            member.consumer.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:  # nothing consumed since the last commit
                raise ClientError(str(e.args[0])) from None

    def group_close(self, member):
        member.consumer.close()

    # -- transactions --
    def txn_produce(self, topic, transactional_id, batches):
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": transactional_id,
                             "transaction.timeout.ms": 60000})
        try:
            producer.init_transactions(API_TIMEOUT)
            for recs, commit in batches:
                producer.begin_transaction()
                for rec in recs:
                    producer.produce(topic, key=rec.key, value=rec.value, headers=rec.headers or None,
                                     **({"partition": rec.partition} if rec.partition is not None else {}))
                producer.flush(API_TIMEOUT)
                if commit:
                    producer.commit_transaction(API_TIMEOUT)
                else:
                    producer.abort_transaction(API_TIMEOUT)
        except KafkaException as e:
            raise ClientError(str(e.args[0])) from None

    def txn_open(self, topic, transactional_id, records):
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": transactional_id,
                             "transaction.timeout.ms": 60000})
        try:
            producer.init_transactions(API_TIMEOUT)
            producer.begin_transaction()
            for rec in records:
                producer.produce(topic, key=rec.key, value=rec.value, headers=rec.headers or None,
                                 **({"partition": rec.partition} if rec.partition is not None else {}))
            producer.flush(API_TIMEOUT)
        except KafkaException as e:
            raise ClientError(str(e.args[0])) from None
        return producer

    def txn_close(self, handle, commit):
        try:
            (handle.commit_transaction if commit else handle.abort_transaction)(API_TIMEOUT)
        except KafkaException as e:
            raise ClientError(str(e.args[0])) from None

    def consume_transform_produce(self, in_topic, out_topic, group, transactional_id, count, timeout=60):
        consumer = self._consumer({"group.id": group, "auto.offset.reset": "earliest",
                                   "isolation.level": "read_committed"})
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": transactional_id,
                             "transaction.timeout.ms": 60000})
        done = 0
        try:
            producer.init_transactions(API_TIMEOUT)
            consumer.subscribe([in_topic])
            deadline = time.monotonic() + timeout
            while done < count and time.monotonic() < deadline:
                msgs = [m for m in consumer.consume(500, timeout=0.2) if m.error() is None]
                if not msgs:
                    continue
                producer.begin_transaction()
                for m in msgs:
                    producer.produce(out_topic, key=m.key(), value=None if m.value() is None else m.value().upper())
                    done += 1
                producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                     consumer.consumer_group_metadata(), API_TIMEOUT)
                producer.commit_transaction(API_TIMEOUT)
            return done
        except KafkaException as e:
            raise ClientError(str(e.args[0])) from None
        finally:
            consumer.close()
