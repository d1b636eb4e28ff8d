"""Replication across real `odradek serve` processes (broker.testing_cluster): 3 nodes, RF 3,
min.insync.replicas=2, stock clients over real sockets, every record read back checked.
"""

from __future__ import annotations

import os
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol import ErrorCode, messages as m
from protocol import records as r

from broker.testing_cluster import call, running_cluster

FAST_FAILURE = {
    "min.insync.replicas": "2",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
}


def _create(cluster, topic: str, partitions: int = 1, replication: int = 3, configs=None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(topic, partitions, replication, config=configs or {})
    admin.create_topics([new], request_timeout=30)[topic].result(60)
    cluster.wait_until(lambda: all(_state(cluster, b, topic)[0] >= 0 for b in cluster.brokers),
                       30, "the topic on every broker")


def _state(cluster, broker: int, topic: str, partition: int = 0):
    """(leader, isr) of a partition as `broker`'s metadata says."""
    response = cluster.metadata(broker, [topic])
    for p in response.topics[0].partitions:
        if p.partition_index == partition:
            return p.leader_id, sorted(p.isr_nodes)
    return -1, []


def _log_bytes(node, topic: str, partition: int = 0) -> bytes:
    directory = os.path.join(node.data_dir, f"{topic}-{partition}")
    names = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    out = b""
    for name in names:
        with open(os.path.join(directory, name), "rb") as f:
            out += f.read()
    return out


def _consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append((message.offset(), message.value()))
    consumer.close()
    return got


def _produce_raw(address, topic: str, acks: int):
    """One acks=`acks` Produce of one record; the partition's error code."""
    R = m.ProduceRequest
    body = R(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(
            index=0, records=r.build_batch([r.SimpleRecord(value=b"raw", timestamp=int(time.time() * 1000))]))])])
    return call(address, 0, 9, body, timeout=15).responses[0].partition_responses[0].error_code


def test_acks_all_records_survive_kill_9_of_the_leader(tmp_path):
    """An idempotent acks=all producer streams while the leader is killed: every acknowledged record
    is read back exactly once, in order, and the surviving replicas hold the same bytes. Then the
    killed broker returns and a preferred leader election moves leadership back, losing nothing."""
    with running_cluster(tmp_path, nodes=3, overrides=FAST_FAILURE) as cluster:
        _create(cluster, "precious")
        leader, isr = _state(cluster, 1, "precious")
        assert isr == [1, 2, 3]
        acknowledged, errors = [], []

        def delivered(err, message):
            (errors if err else acknowledged).append(err or (message.offset(), message.value()))

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 2,
                             "message.timeout.ms": 90000})
        # until 500 records are acknowledged after the kill (by the new leader), however loaded
        # the machine is
        sent, killed_at, deadline = 0, None, time.monotonic() + 180
        while killed_at is None or len(acknowledged) < killed_at + 500:
            assert time.monotonic() < deadline, "the stream stalled"
            producer.produce("precious", b"%08d" % sent, on_delivery=delivered)
            sent += 1
            producer.poll(0)
            time.sleep(0.002)
            if killed_at is None and len(acknowledged) >= 500:
                cluster.kill(leader)
                killed_at = len(acknowledged)
        assert producer.flush(90) == 0
        assert not errors and len(acknowledged) == sent
        assert killed_at + 500 <= sent   # the stream went on well past the kill

        survivors = [b for b in cluster.brokers if b != leader]
        new_leader, new_isr = _state(cluster, survivors[0], "precious")
        assert new_leader in survivors and leader not in new_isr
        got = _consume_all(cluster.bootstrap, "precious", sent)
        values = [value for _, value in got]
        assert values == [b"%08d" % i for i in range(sent)]          # exactly once, in order
        assert sorted(acknowledged) == got                            # at the offsets acknowledged
        cluster.wait_until(lambda: _log_bytes(cluster.nodes[survivors[0]], "precious")
                           == _log_bytes(cluster.nodes[survivors[1]], "precious"), 30,
                           "the surviving replicas to hold the same bytes")
        _check_leader_epoch_answers(cluster, new_leader, "precious")

        # The killed broker (the preferred replica) comes back and rejoins the ISR; a preferred
        # leader election hands it the leadership back while the producer streams: no error,
        # nothing lost or doubled.
        replicas = next(p.replica_nodes for p in cluster.metadata(new_leader, ["precious"]).topics[0].partitions)
        assert replicas[0] == leader
        cluster.start(leader)
        cluster.wait_started([leader], 60)
        cluster.wait_until(lambda: _state(cluster, new_leader, "precious")[1] == [1, 2, 3], 60,
                           "the restarted broker back in the ISR")
        elected, started = None, time.monotonic()
        while time.monotonic() - started < 4 or elected is None:
            producer.produce("precious", b"%08d" % sent, on_delivery=delivered)
            sent += 1
            producer.poll(0)
            time.sleep(0.002)
            if elected is None and time.monotonic() - started > 1:
                elected = _elect_preferred(cluster.nodes[new_leader].address, "precious")
        assert elected == ErrorCode.NONE
        assert producer.flush(90) == 0
        assert not errors and len(acknowledged) == sent
        cluster.wait_until(lambda: _state(cluster, leader, "precious")[0] == leader, 30,
                           "the preferred replica leading again")
        got = _consume_all(cluster.bootstrap, "precious", sent)
        assert [value for _, value in got] == [b"%08d" % i for i in range(sent)]
        assert sorted(acknowledged) == got


def _elect_preferred(address, topic: str) -> int:
    R = m.ElectLeadersRequest
    body = R(election_type=0, timeout_ms=30000, topic_partitions=[R.TopicPartitions(topic=topic, partitions=[0])])
    answer = call(address, 43, 2, body, timeout=60)
    return answer.error_code or answer.replica_election_results[0].partition_result[0].error_code


def _batch_epochs(log: bytes):
    """(base offset, next offset, partition leader epoch) of each batch in a log's bytes."""
    pos, out = 0, []
    while pos + 61 <= len(log):
        base, length, epoch = struct.unpack_from(">qii", log, pos)
        last_delta = struct.unpack_from(">i", log, pos + 23)[0]
        out.append((base, base + last_delta + 1, epoch))
        pos += 12 + length
    return out


def _check_leader_epoch_answers(cluster, leader: int, topic: str) -> None:
    """After a failover: the new leader fences a client with the old leader epoch
    (FENCED_LEADER_EPOCH) and refuses one ahead of it (UNKNOWN_LEADER_EPOCH) in Fetch, ListOffsets
    and OffsetForLeaderEpoch, and OffsetForLeaderEpoch answers each epoch's end from its log as
    Kafka's leader-epoch cache does."""
    epoch = next(p.leader_epoch for p in cluster.metadata(leader, [topic]).topics[0].partitions)
    assert epoch >= 1
    batches = _batch_epochs(_log_bytes(cluster.nodes[leader], topic))
    log_end = batches[-1][1]
    address = cluster.nodes[leader].address

    def fetch(current):
        R = m.FetchRequest
        body = R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024, isolation_level=0,
                 session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
                     R.FetchTopic(topic=topic, partitions=[R.FetchPartition(
                         partition=0, current_leader_epoch=current, fetch_offset=0, log_start_offset=-1,
                         partition_max_bytes=1024)])])
        return call(address, 1, 12, body, timeout=15).responses[0].partitions[0].error_code

    def list_offsets(current):
        R = m.ListOffsetsRequest
        body = R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name=topic, partitions=[
            R.ListOffsetsPartition(partition_index=0, current_leader_epoch=current, timestamp=-1)])])
        answer = call(address, 2, 7, body, timeout=15).topics[0].partitions[0]
        return answer.error_code, answer.leader_epoch

    def end_of(current, asked):
        R = m.OffsetForLeaderEpochRequest
        body = R(replica_id=-1, topics=[R.OffsetForLeaderTopic(topic=topic, partitions=[
            R.OffsetForLeaderPartition(partition=0, current_leader_epoch=current, leader_epoch=asked)])])
        answer = call(address, 23, 4, body, timeout=15).topics[0].partitions[0]
        return answer.error_code, answer.leader_epoch, answer.end_offset

    assert [fetch(e) for e in (epoch - 1, epoch, epoch + 1, -1)] == [
        ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NONE, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NONE]
    assert list_offsets(epoch - 1)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert list_offsets(epoch + 1)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert list_offsets(epoch) == (ErrorCode.NONE, epoch)
    assert end_of(epoch - 1, 0)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert end_of(epoch + 1, 0)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    # epoch 0 (the first leader's) ends where the next epoch in the log starts; the current
    # epoch ends at the log end; an epoch past the current one is unknown (-1, -1)
    first_after_zero = next(base for base, _, e in batches if e > 0)
    assert end_of(epoch, 0) == (ErrorCode.NONE, 0, first_after_zero)
    assert end_of(-1, epoch) == (ErrorCode.NONE, epoch, log_end)
    assert end_of(epoch, epoch + 3) == (ErrorCode.NONE, -1, -1)


def _scrape(port: int) -> dict[str, float]:
    """The unlabelled replication series of a broker's /metrics."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    wanted = ("kafka_server_replicamanager_underreplicatedpartitions ",
              "kafka_server_replicamanager_isrshrinks_total ", "kafka_server_replicamanager_isrexpands_total ")
    return {line.split(" ")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(wanted)}


def test_isr_shrinks_refuses_below_min_isr_and_expands_back(tmp_path):
    """A killed follower leaves the ISR (through the controller); with the topic's
    min.insync.replicas=3 acks=all is then refused (acks=1 is not); restarted, it catches up,
    rejoins the ISR and holds the leader's bytes. The leader's metrics count the partition
    under-replicated meanwhile, and the ISR expansion (its own proposal) once it is back."""
    from broker.testing_cluster import free_port

    ports = {n: free_port() for n in (1, 2, 3)}
    metrics = {n: {"metrics.port": str(ports[n])} for n in ports}
    with running_cluster(tmp_path, nodes=3, overrides=FAST_FAILURE, node_overrides=metrics) as cluster:
        _create(cluster, "guarded", configs={"min.insync.replicas": "3"})
        leader, _ = _state(cluster, 1, "guarded")
        follower = next(b for b in cluster.brokers if b != leader)
        address = cluster.nodes[leader].address
        assert _produce_raw(address, "guarded", -1) == ErrorCode.NONE
        before = _scrape(ports[leader])
        assert before["kafka_server_replicamanager_underreplicatedpartitions"] == 0

        cluster.kill(follower)
        cluster.wait_until(lambda: follower not in _state(cluster, leader, "guarded")[1],
                           30, "the ISR to lose the killed follower")
        # (the shrink is counted only when the leader proposed it; here the controller may have
        # removed the fenced broker first, as KRaft does, so only the gauge is certain)
        cluster.wait_until(lambda: _scrape(ports[leader])["kafka_server_replicamanager_underreplicatedpartitions"]
                           >= 1, 30, "the partition counted under-replicated")
        assert _produce_raw(address, "guarded", -1) == ErrorCode.NOT_ENOUGH_REPLICAS
        assert _produce_raw(address, "guarded", 1) == ErrorCode.NONE      # acks=1 still goes in
        assert _produce_raw(address, "guarded", 1) == ErrorCode.NONE

        cluster.start(follower)
        cluster.wait_until(lambda: _state(cluster, leader, "guarded")[1] == [1, 2, 3],
                           60, "the restarted follower to rejoin the ISR")
        after = cluster.wait_until(lambda: (lambda s: s if s["kafka_server_replicamanager_isrexpands_total"]
                                            > before["kafka_server_replicamanager_isrexpands_total"]
                                            else None)(_scrape(ports[leader])), 30, "the expansion counted")
        assert after["kafka_server_replicamanager_underreplicatedpartitions"] == 0
        assert _produce_raw(address, "guarded", -1) == ErrorCode.NONE
        cluster.wait_until(lambda: len({_log_bytes(cluster.nodes[b], "guarded") for b in cluster.brokers}) == 1,
                           30, "every replica to hold the leader's bytes")
        got = _consume_all(cluster.bootstrap, "guarded", 4)
        assert [value for _, value in got] == [b"raw"] * 4

        # DeleteRecords answers once every replica moved its log start (followers learn it by Fetch).
        R = m.DeleteRecordsRequest
        answer = call(address, 21, 2, R(timeout_ms=15000, topics=[R.DeleteRecordsTopic(
            name="guarded", partitions=[R.DeleteRecordsPartition(partition_index=0, offset=2)])]),
            timeout=30).topics[0].partitions[0]
        assert (answer.error_code, answer.low_watermark) == (ErrorCode.NONE, 2)


def _fetch(address, topic_id, offset: int, rack: str, version: int = 12):
    R = m.FetchRequest
    body = R(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, rack_id=rack, forgotten_topics_data=[], topics=[
                 R.FetchTopic(topic="nearby", topic_id=topic_id, partitions=[R.FetchPartition(
                     partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                     partition_max_bytes=1 << 20)])])
    return call(address, 1, version, body, timeout=15).responses[0].partitions[0]


def test_consumers_read_from_a_replica_in_their_rack(tmp_path):
    """KIP-392: the leader sends a consumer in another broker's rack to that replica, which serves it."""
    from broker.testing_cluster import free_port
    import urllib.request

    ports = {n: free_port() for n in (1, 2, 3)}
    racks = {n: {"broker.rack": f"rack-{n}", "metrics.port": str(ports[n])} for n in (1, 2, 3)}
    overrides = dict(FAST_FAILURE, **{
        "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"})
    with running_cluster(tmp_path, nodes=3, overrides=overrides, node_overrides=racks) as cluster:
        _create(cluster, "nearby")
        leader, _ = _state(cluster, 1, "nearby")
        follower = next(b for b in cluster.brokers if b != leader)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(100):
            producer.produce("nearby", b"%03d" % i)
        assert producer.flush(30) == 0

        # raw: the leader points a rack-`follower` consumer at the follower; it serves the records
        answer = _fetch(cluster.nodes[leader].address, None, 0, f"rack-{follower}")
        assert answer.preferred_read_replica == follower and not answer.records
        assert _fetch(cluster.nodes[leader].address, None, 0, f"rack-{leader}").records
        cluster.wait_until(lambda: _fetch(cluster.nodes[follower].address, None, 0, "").high_watermark == 100,
                           30, "the follower's high watermark to reach the leader's")
        served = _fetch(cluster.nodes[follower].address, None, 0, f"rack-{follower}")
        assert served.error_code == 0 and list(r.iter_batches(served.records))

        # a stock consumer with client.rack reads everything, from the follower
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "racked",
                             "client.rack": f"rack-{follower}", "enable.auto.commit": False})
        consumer.assign([TopicPartition("nearby", 0, 0)])
        got, deadline = [], time.monotonic() + 60
        while len(got) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
        consumer.close()
        assert got == [b"%03d" % i for i in range(100)]
        scrape = urllib.request.urlopen(f"http://127.0.0.1:{ports[follower]}/metrics", timeout=10).read()
        served_bytes = [line for line in scrape.decode().splitlines()
                        if line.startswith("kafka_server_brokertopicmetrics_bytesout_total")
                        and 'topic="nearby"' in line]
        assert served_bytes and float(served_bytes[0].rsplit(" ", 1)[1]) > 0


@pytest.mark.slow
def test_rolling_restart_under_load_surfaces_no_error(tmp_path):
    """Each node in turn is stopped (SIGTERM: controlled shutdown moves its leaderships away) and
    started again while an idempotent acks=all producer streams and a consumer reads along; neither
    sees an error (a dropped connection to the node being restarted is all the consumer may be told),
    and both the live consumer and a later one read every record once, in order. Marked slow (about
    a minute)."""
    import threading

    with running_cluster(tmp_path, nodes=3, overrides=FAST_FAILURE) as cluster:
        _create(cluster, "rolling")
        acknowledged, errors = [], []
        stop = threading.Event()

        def delivered(err, message):
            (errors if err else acknowledged).append(err or message.value())

        def stream():
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 5,
                                 "message.timeout.ms": 120000})
            sent = 0
            while not stop.is_set():
                producer.produce("rolling", b"%08d" % sent, on_delivery=delivered)
                sent += 1
                producer.poll(0)
                time.sleep(0.003)
            producer.flush(120)

        live, consumer_errors, produced_all = [], [], threading.Event()

        def read_along():
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "along",
                                 "enable.auto.commit": False})
            consumer.assign([TopicPartition("rolling", 0, 0)])
            deadline = None
            while not (produced_all.is_set() and len(live) >= len(acknowledged)):
                if produced_all.is_set():
                    deadline = deadline or time.monotonic() + 90
                    if time.monotonic() > deadline:
                        break
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() != KafkaError._TRANSPORT:
                        consumer_errors.append(message.error())
                    continue
                live.append(message.value())
            consumer.close()

        worker = threading.Thread(target=stream)
        worker.start()
        reader = threading.Thread(target=read_along)
        reader.start()
        try:
            for node in cluster.brokers:
                time.sleep(2)
                assert cluster.stop(node) == 0
                cluster.start(node)
                cluster.wait_started([node], 60)
                cluster.wait_until(lambda: _state(cluster, node, "rolling")[1] == [1, 2, 3], 60,
                                   f"node {node} back in the ISR")
            time.sleep(2)
        finally:
            stop.set()
            worker.join(180)
            produced_all.set()
            reader.join(120)
        assert not errors, errors[:3]
        assert not reader.is_alive() and not consumer_errors, consumer_errors[:3]
        expected = [b"%08d" % i for i in range(len(acknowledged))]
        assert live == expected
        got = _consume_all(cluster.bootstrap, "rolling", len(acknowledged), timeout=90)
        assert [value for _, value in got] == expected
