"""Idempotent and transactional producers with real clients against an in-process broker."""

import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing import running_broker


def create_topics(bootstrap, *names, partitions=2):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(10)


def consume_all(bootstrap, topic, isolation, expect, group=None, timeout=20.0, partitions=2):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"reader-{isolation}-{time.time()}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    values, deadline, idle_since = [], time.time() + timeout, None
    while time.time() < deadline:
        m = c.poll(0.1)
        if m is None:
            if len(values) >= expect:
                idle_since = idle_since or time.time()
                if time.time() - idle_since > 1.0:  # nothing more is coming
                    break
            continue
        if not m.error():
            values.append(m.value())
            idle_since = None
    c.close()
    return values


@pytest.mark.timeout(60)
def test_idempotent_producer_writes_exactly_once(tmp_path):
    with running_broker(tmp_path / "data") as broker:
        create_topics(broker.bootstrap, "idem")
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        for i in range(2000):
            p.produce("idem", value=b"%d" % i, partition=i % 2)
            if i % 500 == 0:
                p.poll(0)
        assert p.flush(20) == 0
        values = consume_all(broker.bootstrap, "idem", "read_uncommitted", 2000)
        assert sorted(values) == sorted(b"%d" % i for i in range(2000))


@pytest.mark.timeout(90)
def test_transactions_commit_and_abort_with_read_committed(tmp_path):
    with running_broker(tmp_path / "data") as broker:
        create_topics(broker.bootstrap, "tx")
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tp-1", "linger.ms": 5})
        p.init_transactions(20)
        p.begin_transaction()
        for i in range(10):
            p.produce("tx", value=b"committed-%d" % i, partition=i % 2)
        p.commit_transaction(20)
        p.begin_transaction()
        for i in range(10):
            p.produce("tx", value=b"aborted-%d" % i, partition=i % 2)
        p.flush(10)
        p.abort_transaction(20)
        p.begin_transaction()
        p.produce("tx", value=b"committed-last", partition=0)
        p.commit_transaction(20)
        committed = consume_all(broker.bootstrap, "tx", "read_committed", 11)
        assert sorted(committed) == sorted([b"committed-%d" % i for i in range(10)] + [b"committed-last"])
        everything = consume_all(broker.bootstrap, "tx", "read_uncommitted", 21)
        assert len(everything) == 21 and sum(v.startswith(b"aborted") for v in everything) == 10
        txns = broker.broker.coordinators["transaction"]
        assert txns.describe("tp-1").state == "CompleteCommit"


@pytest.mark.timeout(90)
def test_consume_transform_produce_with_send_offsets(tmp_path):
    with running_broker(tmp_path / "data") as broker:
        create_topics(broker.bootstrap, "in", "out", partitions=1)
        src = ck.Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(6):
            src.produce("in", value=b"%d" % i, partition=0)
        src.flush(10)
        c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ctp", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
        c.subscribe(["in"])
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ctp-1"})
        p.init_transactions(20)
        seen, deadline = [], time.time() + 20
        while len(seen) < 6 and time.time() < deadline:
            m = c.poll(0.1)
            if m is not None and not m.error():
                seen.append(m)
        assert len(seen) == 6
        # first batch of three: committed with its offsets; second: aborted, offsets not moved
        for chunk, commit in ((seen[:3], True), (seen[3:], False)):
            p.begin_transaction()
            for m in chunk:
                p.produce("out", value=b"x" + m.value(), partition=0)
            offsets = [ck.TopicPartition("in", 0, chunk[-1].offset() + 1)]
            p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), 20)
            (p.commit_transaction if commit else p.abort_transaction)(20)
        committed = c.committed([ck.TopicPartition("in", 0)], timeout=10)
        assert committed[0].offset == 3
        c.close()
        assert sorted(consume_all(broker.bootstrap, "out", "read_committed", 3, partitions=1)) == [b"x0", b"x1", b"x2"]


@pytest.mark.timeout(60)
def test_fenced_producer_and_restart_keeps_transaction_state(tmp_path):
    data = tmp_path / "data"
    with running_broker(data) as broker:
        create_topics(broker.bootstrap, "fence")
        old = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "fz"})
        old.init_transactions(20)
        old.begin_transaction()
        old.produce("fence", value=b"zombie", partition=0)
        old.flush(10)
        new = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "fz"})
        new.init_transactions(30)  # aborts the zombie's open transaction and fences it
        with pytest.raises(ck.KafkaException):
            old.commit_transaction(10)
        new.begin_transaction()
        new.produce("fence", value=b"fresh", partition=0)
        new.commit_transaction(20)
        epoch = broker.broker.coordinators["transaction"].txns["fz"].producer_epoch
    with running_broker(data) as broker:
        assert consume_all(broker.bootstrap, "fence", "read_committed", 1) == [b"fresh"]
        again = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "fz"})
        again.init_transactions(20)
        assert broker.broker.coordinators["transaction"].txns["fz"].producer_epoch == epoch + 1


@pytest.mark.timeout(60)
def test_offsets_of_every_transaction_survive_a_coordinator_reload(tmp_path):
    # each transaction of one producer epoch writes its own offset commit to __consumer_offsets; a
    # coordinator that loads the partition (here after a restart) must see the last one committed
    data = tmp_path / "data"
    with running_broker(data) as broker:
        create_topics(broker.bootstrap, "in", partitions=1)
        c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reload", "enable.auto.commit": False})
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "reload-1"})
        p.init_transactions(20)
        for offset in (3, 6, 9):
            p.begin_transaction()
            p.send_offsets_to_transaction([ck.TopicPartition("in", 0, offset)], c.consumer_group_metadata(), 20)
            p.commit_transaction(20)
        assert c.committed([ck.TopicPartition("in", 0)], timeout=10)[0].offset == 9
        c.close()
    with running_broker(data) as broker:
        c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reload", "enable.auto.commit": False})
        assert c.committed([ck.TopicPartition("in", 0)], timeout=10)[0].offset == 9
        c.close()
