"""kafka-python."""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from ..records import Rec
from .base import Client, ClientError, Delivery, PollResult, Unsupported

API_TIMEOUT_MS = 30000
ASSIGNORS = {"range": RangePartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}


def _rec(msg) -> Rec:
    return Rec(key=msg.key, value=msg.value, headers=list(msg.headers or []), partition=msg.partition,
               timestamp=msg.timestamp, offset=msg.offset)


def _check_expressible(records) -> None:
    for rec in records:
        if rec.key is None and rec.value is None:
            raise Unsupported("kafka-python's send() refuses a record with neither key nor value")
        if any(v is None for _, v in rec.headers):
            raise Unsupported("kafka-python's send() refuses None header values")


def _wrap(call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except KafkaError as e:
        raise ClientError(f"{type(e).__name__}: {e}") from None


class KafkaPythonClient(Client):
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self._admin = None

    @property
    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=API_TIMEOUT_MS)
        return self._admin

    def close(self):
        if self._admin is not None:
            self._admin.close()

    def metadata(self):
        c = _wrap(self.admin.describe_cluster)
        return {"cluster_id": c["cluster_id"], "controller_id": c["controller_id"],
                "brokers": [{"id": b["broker_id"], "host": b["host"], "port": b["port"]} for b in c["brokers"]],
                "topics": sorted(_wrap(self.admin.list_topics))}

    def create_topic(self, topic, partitions, configs=None):
        _wrap(self.admin.create_topics, [NewTopic(topic, partitions, 1, topic_configs=dict(configs or {}))],
              timeout_ms=API_TIMEOUT_MS)

    def partition_count(self, topic):
        (desc,) = _wrap(self.admin.describe_topics, [topic])
        if desc["error_code"]:
            raise ClientError(f"error code {desc['error_code']}")
        return len(desc["partitions"])

    def describe_configs(self, topic):
        answer = _wrap(self.admin.describe_configs, [ConfigResource(ConfigResourceType.TOPIC, topic)],
                       config_filter="all")
        return {k: v["value"] for k, v in answer["topic"][topic].items()}

    def create_partitions(self, topic, total):
        _wrap(self.admin.create_partitions, {topic: NewPartitions(total)}, timeout_ms=API_TIMEOUT_MS)

    def delete_topic(self, topic):
        _wrap(self.admin.delete_topics, [topic], timeout_ms=API_TIMEOUT_MS)

    def produce(self, topic, records, *, acks="all", compression="none", idempotent=None, linger_ms=5, timeout=60):
        config = {"bootstrap_servers": self.bootstrap, "acks": acks if acks == "all" else int(acks),
                  "compression_type": None if compression == "none" else compression, "linger_ms": linger_ms,
                  "request_timeout_ms": 15000, "delivery_timeout_ms": int(timeout * 1000) - 5000,
                  "max_block_ms": 30000}
        if idempotent is not None:
            config["enable_idempotence"] = idempotent
        elif acks != "all":
            config["enable_idempotence"] = False
        _check_expressible(records)
        producer = _wrap(KafkaProducer, **config)
        try:
            futures = []
            for rec in records:
                try:
                    futures.append(producer.send(topic, key=rec.key, value=rec.value, headers=rec.headers,
                                                 partition=rec.partition, timestamp_ms=rec.timestamp))
                except KafkaError as e:  # e.g. MessageSizeTooLargeError raised before sending
                    futures.append(e)
            producer.flush(timeout)
            deliveries = []
            for f in futures:
                if isinstance(f, KafkaError):
                    deliveries.append(Delivery(error=f"{type(f).__name__}: {f}"))
                    continue
                try:
                    md = f.get(timeout=timeout)
                    deliveries.append(Delivery(md.partition, md.offset if acks != "0" and md.offset >= 0 else None))
                except KafkaError as e:
                    deliveries.append(Delivery(error=f"{type(e).__name__}: {e}"))
            return deliveries
        finally:
            producer.close(timeout=10)

    def _consumer(self, **extra) -> KafkaConsumer:
        config = {"bootstrap_servers": self.bootstrap, "enable_auto_commit": False,
                  "request_timeout_ms": API_TIMEOUT_MS + 5000, **extra}
        return _wrap(KafkaConsumer, **config)

    def _partitions(self, consumer, topic, partitions):
        if partitions is not None:
            return partitions
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = consumer.partitions_for_topic(topic)
            if found:
                return sorted(found)
            time.sleep(0.2)
        raise ClientError(f"no partitions known for {topic}")

    def consume(self, topic, *, partitions=None, start=None, isolation="read_uncommitted", timeout=30):
        consumer = self._consumer(isolation_level=isolation)
        try:
            tps = [TopicPartition(topic, p) for p in self._partitions(consumer, topic, partitions)]
            consumer.assign(tps)
            end = _wrap(consumer.end_offsets, tps)
            if start is None:
                consumer.seek_to_beginning(*tps)
            else:
                for tp in tps:
                    consumer.seek(tp, start[tp.partition])
            records = []
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and any(consumer.position(tp) < end[tp] for tp in tps):
                for tp, msgs in _wrap(consumer.poll, timeout_ms=200).items():
                    records.extend(_rec(m) for m in msgs if m.offset < end[tp])
            return records
        finally:
            consumer.close()

    def offsets_for_times(self, topic, partition, timestamps):
        consumer = self._consumer()
        try:
            tp = TopicPartition(topic, partition)
            out = []
            for ts in timestamps:
                found = _wrap(consumer.offsets_for_times, {tp: ts}, timeout_ms=API_TIMEOUT_MS)[tp]
                out.append(None if found is None else found.offset)
            return out
        finally:
            consumer.close()

    def list_offsets(self, topic, partitions):
        consumer = self._consumer()
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            begin = _wrap(consumer.beginning_offsets, tps)
            end = _wrap(consumer.end_offsets, tps)
            return {tp.partition: (begin[tp], end[tp]) for tp in tps}
        finally:
            consumer.close()

    def commit(self, group, topic, offsets):
        consumer = self._consumer(group_id=group)
        try:
            _wrap(consumer.commit, {TopicPartition(topic, p): OffsetAndMetadata(o, m, -1)
                                    for p, (o, m) in offsets.items()})
        finally:
            consumer.close()

    def committed(self, group, topic, partitions):
        consumer = self._consumer(group_id=group)
        try:
            out = {}
            for p in partitions:
                om = _wrap(consumer.committed, TopicPartition(topic, p), metadata=True)
                out[p] = None if om is None else (om.offset, om.metadata)
            return out
        finally:
            consumer.close()

    def group_offsets(self, group):
        answer = _wrap(self.admin.list_group_offsets, {group: None})[group]
        return {(tp.topic, tp.partition): om.offset for tp, om in answer.items() if om.offset >= 0}

    # -- groups --
    class Member(ConsumerRebalanceListener):
        def __init__(self, consumer):
            self.consumer = consumer
            self.assigned_events = 0
            self.revoked_events = 0

        def on_partitions_assigned(self, assigned):
            self.assigned_events += 1

        def on_partitions_revoked(self, revoked):
            if revoked:
                self.revoked_events += 1

    def group_open(self, group, topic, *, instance_id=None, assignor="range", session_timeout_ms=10000):
        if assignor == "cooperative-sticky":
            # Seen in about half the runs: after the incremental revoke, the member that kept two partitions
            # never fetches them again (its debug log shows no fetch activity for them, positions valid);
            # the broker never gets a request. Java and librdkafka pass the same scenario every time.
            raise Unsupported("kafka-python 3.0.12's cooperative-sticky member can stop fetching after an "
                              "incremental revoke (client defect)")
        consumer = self._consumer(group_id=group, group_instance_id=instance_id, auto_offset_reset="earliest",
                                  partition_assignment_strategy=[ASSIGNORS[assignor]],
                                  session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=1000)
        # kafka-python's leader assigns with whatever metadata it holds at that moment; with Kafka's shipped
        # group.initial.rebalance.delay.ms=0 the join can complete first and leave it with an empty
        # assignment it does not revisit. Knowing the topic's partitions up front avoids that race.
        self._partitions(consumer, topic, None)
        member = self.Member(consumer)
        consumer.subscribe([topic], listener=member)
        return member

    def group_poll(self, member, timeout_ms=200):
        polled = _wrap(member.consumer.poll, timeout_ms=timeout_ms)
        records = [_rec(m) for msgs in polled.values() for m in msgs]
        return PollResult(records, sorted(tp.partition for tp in member.consumer.assignment()),
                          member.assigned_events, member.revoked_events)

    def group_commit(self, member):
        _wrap(member.consumer.commit)

    def group_close(self, member):
        member.consumer.close()

    # -- transactions --
    def _txn_producer(self, transactional_id):
        return _wrap(KafkaProducer, bootstrap_servers=self.bootstrap, transactional_id=transactional_id,
                     transaction_timeout_ms=60000, max_block_ms=30000)

    def txn_produce(self, topic, transactional_id, batches):
        producer = self._txn_producer(transactional_id)
        try:
            _wrap(producer.init_transactions)
            for recs, commit in batches:
                _wrap(producer.begin_transaction)
                _check_expressible(recs)
                for rec in recs:
                    producer.send(topic, key=rec.key, value=rec.value, headers=rec.headers, partition=rec.partition)
                _wrap(producer.flush, 30)
                _wrap(producer.commit_transaction if commit else producer.abort_transaction)
        finally:
            producer.close(timeout=10)

    def txn_open(self, topic, transactional_id, records):
        _check_expressible(records)
        producer = self._txn_producer(transactional_id)
        _wrap(producer.init_transactions)
        _wrap(producer.begin_transaction)
        for rec in records:
            producer.send(topic, key=rec.key, value=rec.value, headers=rec.headers, partition=rec.partition)
        _wrap(producer.flush, 30)
        return producer

    def txn_close(self, handle, commit):
        try:
            _wrap(handle.commit_transaction if commit else handle.abort_transaction)
        finally:
            handle.close(timeout=10)

    def consume_transform_produce(self, in_topic, out_topic, group, transactional_id, count, timeout=60):
        consumer = self._consumer(group_id=group, auto_offset_reset="earliest", isolation_level="read_committed")
        producer = self._txn_producer(transactional_id)
        done = 0
        try:
            _wrap(producer.init_transactions)
            consumer.subscribe([in_topic])
            deadline = time.monotonic() + timeout
            while done < count and time.monotonic() < deadline:
                polled = _wrap(consumer.poll, timeout_ms=200)
                if not polled:
                    continue
                _wrap(producer.begin_transaction)
                offsets = {}
                for tp, msgs in polled.items():
                    for m in msgs:
                        producer.send(out_topic, key=m.key, value=None if m.value is None else m.value.upper())
                        done += 1
                    offsets[tp] = OffsetAndMetadata(msgs[-1].offset + 1, "", -1)
                _wrap(producer.send_offsets_to_transaction, offsets, consumer.group_metadata())
                _wrap(producer.commit_transaction)
            return done
        finally:
            consumer.close()
            producer.close(timeout=10)
