"""Real `odradek serve` processes forming one cluster on loopback (broker.testing_cluster).

Each test starts its own cluster: 3 combined nodes, or 3 dedicated controllers + 3 brokers; clients
are stock confluent-kafka and kafka-python over real sockets, and every record read back is checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol import ErrorCode, messages as m

from broker.testing_cluster import REPO_ROOT, Cluster, call, free_port, running_cluster


def _metrics(port: int) -> dict[str, float]:
    """Prometheus text from /metrics as {series: value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def _readyz(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _admin(bootstrap: str, *args: str):
    """`odradek <args> -b bootstrap --json`, decoded."""
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    result = subprocess.run([sys.executable, "-m", "broker.cli", *args, "-b", bootstrap, "--json"],
                            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, replication)], request_timeout=30)
    futures[name].result(60)


def _produce_and_consume(bootstrap: str, topic: str, partitions: int, count: int = 300) -> dict:
    """Produce `count` keyed records with acks=all; read them all back; return {partition: n}."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = {}
    for i in range(count):
        key, value = f"k{i}".encode(), f"value-{i}-{uuid.uuid4().hex[:6]}".encode()
        producer.produce(topic, value, key=key, partition=i % partitions)
        sent[key] = value
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, per_partition = {}, {}
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        got[message.key()] = message.value()
        per_partition[message.partition()] = per_partition.get(message.partition(), 0) + 1
    consumer.close()
    assert got == sent
    return per_partition


def _leaders(cluster, broker: int, topic: str) -> dict[int, int]:
    response = cluster.metadata(broker, [topic])
    return {p.partition_index: p.leader_id for p in response.topics[0].partitions}


def test_three_combined_nodes_are_one_cluster(tmp_path):
    with running_cluster(tmp_path, nodes=3) as cluster:
        # Every broker lists all three with their advertised listeners.
        for broker in cluster.brokers:
            listed = {(b.node_id, b.port) for b in cluster.metadata(broker).brokers}
            assert listed == {(n, cluster.nodes[n].port) for n in cluster.brokers}
        # Every controller registered its listener (ControllerRegistration); an admin client
        # bootstrapped with a controller finds them all (ApiVersions, DescribeCluster KIP-919).
        controller_address = ("127.0.0.1", cluster.nodes[3].controller_port)
        versions = call(controller_address, 18, 3, m.ApiVersionsRequest(
            client_software_name="odradek-test", client_software_version="1"))
        served = {v.api_key: (v.min_version, v.max_version) for v in versions.api_keys}
        assert served[52] == (0, 2) and 55 in served and 60 in served and 62 in served
        expected = {(c, cluster.nodes[c].controller_port) for c in cluster.controllers}
        cluster.wait_until(lambda: {(b.broker_id, b.port) for b in call(
            controller_address, 60, 1, m.DescribeClusterRequest(endpoint_type=2)).brokers}
            == expected, 20, "every controller registered")
        # A topic created through node 2 is spread over all three and seen alike everywhere.
        topic = "spread"
        _create_topic(f"127.0.0.1:{cluster.nodes[2].port}", topic, 6)
        # (node 1 learns of it from the metadata log a moment later, as a Kafka broker does)
        leaders = cluster.wait_until(lambda: (lambda found: found if len(found) == 6 else None)(
            _leaders(cluster, 1, topic)), 20, "node 1 to see the new topic")
        assert sorted(set(leaders.values())) == [1, 2, 3]
        for broker in cluster.brokers:
            cluster.wait_until(lambda b=broker: _leaders(cluster, b, topic) == leaders, 20,
                               f"node {broker} to see the same leaders")
        per_partition = _produce_and_consume(cluster.bootstrap, topic, 6)
        assert sorted(per_partition) == list(range(6))
        # A broker that does not lead a partition sends the client to the one that does.
        partition, leader = next(iter(leaders.items()))
        other = next(b for b in cluster.brokers if b != leader)
        R = m.ListOffsetsRequest
        body = R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
            name=topic, partitions=[R.ListOffsetsPartition(partition_index=partition,
                                                           timestamp=-1)])])
        answer = call(cluster.nodes[other].address, 2, 7, body)
        assert answer.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        answer = call(cluster.nodes[leader].address, 2, 7, body)
        assert answer.topics[0].partitions[0].error_code == 0
        assert answer.topics[0].partitions[0].offset == per_partition[partition]


def test_dedicated_controllers_and_observer_brokers(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic

    # Broker 5 knows only KIP-853's bootstrap servers, not the voters: it asks them.
    cluster = Cluster(tmp_path, nodes=3, topology="split")
    bootstrap_servers = ",".join(f"127.0.0.1:{cluster.nodes[c].controller_port}"
                                 for c in cluster.controllers)
    cluster.nodes[5].settings.update({"controller.quorum.voters": "",
                                      "controller.quorum.bootstrap.servers": bootstrap_servers})
    with running_cluster(tmp_path, cluster=cluster) as cluster:
        assert cluster.brokers == [4, 5, 6] and cluster.controllers == [1, 2, 3]
        assert "metadata quorum voters from 127.0.0.1:" in cluster.nodes[5].log()
        quorum = cluster.describe_quorum().topics[0].partitions[0]
        assert sorted(v.replica_id for v in quorum.current_voters) == [1, 2, 3]
        assert sorted(o.replica_id for o in quorum.observers) == [4, 5, 6]
        # DescribeQuorum v2 names every voter's controller listener (KIP-853's Nodes).
        described = cluster.describe_quorum()
        assert sorted((n.node_id, [(l.name, l.host, l.port) for l in n.listeners])
                      for n in described.nodes) == [
            (c, [("CONTROLLER", "127.0.0.1", cluster.nodes[c].controller_port)])
            for c in cluster.controllers]
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
        admin.create_topics([KNewTopic("observed", 3, 1)])
        admin.close()
        cluster.wait_until(lambda: all(len(_leaders(cluster, b, "observed")) == 3
                                       for b in cluster.brokers), 20, "the topic everywhere")
        assert sorted(set(_leaders(cluster, 4, "observed").values())) == [4, 5, 6]
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        for i in range(90):
            producer.send("observed", key=b"%d" % i, value=b"v%d" % i, partition=i % 3)
        producer.flush(30)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, consumer_timeout_ms=10000,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        consumer.assign([KTopicPartition("observed", p) for p in range(3)])
        got = {message.key: message.value for message in consumer}
        consumer.close()
        assert got == {b"%d" % i: b"v%d" % i for i in range(90)}
        # Controlled shutdown: SIGTERM makes broker 6 ask the controller to release it first, so
        # the others stop listing it at once instead of after broker.session.timeout.ms.
        stopping_at = time.monotonic()
        assert cluster.stop(6) == 0
        assert "controlled shutdown: the controller released this broker" in cluster.nodes[6].log()
        cluster.wait_until(lambda: all(6 not in {b.node_id for b in cluster.metadata(n).brokers}
                                       for n in (4, 5)), 10, "broker 6 gone from Metadata")
        session = int(cluster.nodes[4].settings["broker.session.timeout.ms"]) / 1000
        assert time.monotonic() - stopping_at < session
        # Decommissioned: UnregisterBroker through a broker removes its registration for good.
        answer = call(cluster.nodes[5].address, 64, 0, m.UnregisterBrokerRequest(broker_id=6))
        assert answer.error_code == 0
        cluster.wait_until(lambda: sorted(b.broker_id for b in call(
            cluster.nodes[4].address, 60, 2, m.DescribeClusterRequest(
                endpoint_type=1, include_fenced_brokers=True)).brokers) == [4, 5],
            10, "broker 6 unregistered everywhere")
        answer = call(cluster.nodes[5].address, 64, 0, m.UnregisterBrokerRequest(broker_id=6))
        assert answer.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_killing_the_active_controller_elects_another(tmp_path):
    with running_cluster(tmp_path, nodes=3) as cluster:
        leader = cluster.active_controller()
        assert leader in cluster.controllers
        killed_at = time.monotonic()
        cluster.kill(leader)
        survivors = [b for b in cluster.brokers if b != leader]
        new_leader = cluster.wait_until(
            lambda: (lambda l: l if l not in (-1, leader) else None)(cluster.active_controller()),
            15, "a new active controller")
        assert new_leader in survivors
        # A broker forwards CreateTopics to the new active controller.
        _create_topic(f"127.0.0.1:{cluster.nodes[survivors[0]].port}", "after-failover", 2)
        elapsed = time.monotonic() - killed_at
        assert elapsed < 15, f"CreateTopics served {elapsed:.1f} s after the kill"
        print(f"active controller {leader} killed: controller {new_leader} served CreateTopics "
              f"{elapsed:.2f} s later")
        # (RF=1 partitions placed on the dead broker before it is fenced stay offline, as in Kafka.)
        cluster.wait_until(lambda: len(_leaders(cluster, survivors[1], "after-failover")) == 2,
                           20, "the new topic on the other survivor")


def test_a_killed_broker_is_fenced_and_loses_its_partitions(tmp_path):
    metrics_ports = {c: free_port() for c in (1, 2, 3, 4)}
    settings = {node: {"metrics.port": str(port)} for node, port in metrics_ports.items()}
    for broker, rack in ((4, "r1"), (5, "r2"), (6, "r2")):
        settings.setdefault(broker, {})["broker.rack"] = rack
    cluster = Cluster(tmp_path, nodes=3, topology="split", node_overrides=settings)
    # Broker 4 spells the voters' host differently: it still joins the controllers' cluster
    # (a fresh broker takes the quorum's cluster id rather than deriving one).
    cluster.nodes[4].settings["controller.quorum.voters"] = ",".join(
        f"{c}@localhost:{cluster.nodes[c].controller_port}" for c in cluster.controllers)
    with running_cluster(tmp_path, cluster=cluster) as cluster:
        _create_topic(cluster.bootstrap, "fragile", 6)
        _create_topic(cluster.bootstrap, "sturdy", 3, replication=3)
        cluster.wait_until(lambda: len(_leaders(cluster, 4, "fragile")) == 6
                           and len(_leaders(cluster, 4, "sturdy")) == 3, 20, "the topics")
        sturdy_before = {p.partition_index: p for p in
                         cluster.metadata(4, ["sturdy"]).topics[0].partitions}
        # Kafka's striped placer reshuffles after every 3 partitions, so one of rack r2's two
        # brokers may lead none of the 6: the victim is an r2 broker that leads some.
        leaders = _leaders(cluster, 4, "fragile")
        victim = 6 if 6 in leaders.values() else 5
        led = [p for p, b in leaders.items() if b == victim]
        assert led, leaders
        killed_at = time.monotonic()
        cluster.kill(victim)
        session = int(cluster.nodes[4].settings["broker.session.timeout.ms"]) / 1000

        def fenced_and_offline():
            md = cluster.metadata(4, ["fragile", "sturdy"])
            listed = {b.node_id for b in md.brokers}
            parts = {p.partition_index: p for p in md.topics[0].partitions}
            sturdy = md.topics[1].partitions
            # RF=1 partitions of the dead broker go offline; RF=3 ones get a new leader.
            return (victim not in listed and all(parts[p].leader_id == -1 for p in led)
                    and all(p.leader_id not in (victim, -1) and victim not in p.isr_nodes
                            for p in sturdy))
        cluster.wait_until(fenced_and_offline, session + 10, "the dead broker fenced")
        elapsed = time.monotonic() - killed_at
        # The session timeout, plus the controller's check interval and the observers' fetch.
        assert elapsed < session + 2.5, f"fenced after {elapsed:.1f} s"
        print(f"broker fenced, new leaders elected {elapsed:.2f} s after kill -9 "
              f"(broker.session.timeout.ms {session:.0f} s)")
        for p in cluster.metadata(4, ["sturdy"]).topics[0].partitions:
            if sturdy_before[p.partition_index].leader_id == victim:
                assert p.leader_epoch > sturdy_before[p.partition_index].leader_epoch
        # The admin tools show it: fenced with its rack, an observer, replicas and ISR.
        bootstrap = f"127.0.0.1:{cluster.nodes[4].port}"
        described = _admin(bootstrap, "cluster", "describe")
        assert [(b["id"], b["rack"], b["status"]) for b in described["brokers"]] == \
            [(b, rack, "fenced" if b == victim else "unfenced") for b, rack in
             ((4, "r1"), (5, "r2"), (6, "r2"))]
        quorum = _admin(bootstrap, "quorum", "describe")
        assert quorum["voters"] == [1, 2, 3] and sorted(quorum["observers"]) == [4, 5, 6]
        lags = {r["node_id"]: r["lag"] for r in quorum["replicas"]}
        assert lags[4] is not None and lags[4] <= 5
        [topic] = _admin(bootstrap, "topics", "describe", "fragile")
        for partition in topic["partitions"]:
            assert partition["isr"] == partition["replicas"]
            if partition["partition"] in led:
                assert partition["leader"] == -1 and partition["offline"] == [victim]
        # The active controller's metrics count the fenced broker and the offline partitions.
        active = cluster.active_controller()
        scraped = _metrics(metrics_ports[active])
        assert scraped["kafka_controller_kafkacontroller_activecontrollercount"] == 1
        assert scraped["kafka_controller_kafkacontroller_fencedbrokercount"] == 1
        assert scraped["kafka_controller_kafkacontroller_activebrokercount"] == 2
        assert scraped["kafka_controller_kafkacontroller_offlinepartitionscount"] == len(led)
        assert scraped['kafka_server_raft_metrics_replica_lag{node_id="4"}'] <= 5
        standby = next(c for c in cluster.controllers if c != active)
        assert _metrics(metrics_ports[standby])[
            "kafka_controller_kafkacontroller_activecontrollercount"] == 0
        # It comes back on restart and leads its partitions again.
        cluster.restart(victim)
        cluster.wait_until(lambda: all(_leaders(cluster, 4, "fragile")[p] == victim for p in led),
                           30, "the restarted broker leading again")
        # Without its quorum a broker says so (/readyz, its log) and keeps trying; it is ready again
        # once the controllers are back.
        assert _readyz(metrics_ports[4])[0] == 200
        said_before = cluster.nodes[4].log().count("; retrying")
        for controller in cluster.controllers:
            cluster.kill(controller)
        status, body = cluster.wait_until(
            lambda: (lambda answer: answer if answer[0] == 503 else None)(
                _readyz(metrics_ports[4])), 20, "broker 4 not ready")
        assert "metadata" in body["checks"] and "controller" in body["checks"]["metadata"], body
        cluster.wait_until(lambda: cluster.nodes[4].log().count("; retrying") > said_before, 20,
                           "the loss logged")
        for controller in cluster.controllers:
            cluster.start(controller)
        cluster.wait_until(lambda: _readyz(metrics_ports[4])[0] == 200, 60, "broker 4 ready again")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("restarted", ["active-controller", pytest.param("every-node",
                                                                         marks=pytest.mark.slow)])
def test_rolling_restart_of_every_node_loses_nothing(tmp_path, restarted):
    """Every node (the default run: the active controller alone) restarted in turn (SIGTERM: controlled shutdown) while a producer and a consumer
    run: no delivery or consume error, every acknowledged record consumed exactly once, in order per
    partition. RF=3 partitions move their leaders off the stopping node (the clients follow on
    NOT_LEADER_OR_FOLLOWER); RF=1 partitions wait for their node (the clients retry)."""
    import threading

    with running_cluster(tmp_path, nodes=3) as cluster:
        topics = {"rolling-rf1": 1, "rolling-rf3": 3}
        partitions = 6
        for topic, replication in topics.items():
            _create_topic(cluster.bootstrap, topic, partitions, replication)
        everywhere = [(t, p) for t in topics for p in range(partitions)]
        cluster.wait_until(lambda: all(len(_leaders(cluster, b, t)) == partitions
                                       for b in cluster.brokers for t in topics), 30, "the topics")
        stop_producing, stop_consuming = threading.Event(), threading.Event()
        acked = {tp: [] for tp in everywhere}
        consumed = {tp: [] for tp in everywhere}
        errors = []

        def on_delivery(error, message):
            if error is not None:
                errors.append(("produce", error))
            else:
                acked[(message.topic(), message.partition())].append(message.value())

        def produce():
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5,
                                 "enable.idempotence": True, "acks": "all"})
            i = 0
            while not stop_producing.is_set():
                topic, partition = everywhere[i % len(everywhere)]
                producer.produce(topic, b"%08d" % i, partition=partition, on_delivery=on_delivery)
                producer.poll(0)
                i += 1
                time.sleep(0.004)
            if producer.flush(120) != 0:
                errors.append(("produce", "records left unacknowledged"))

        def consume():
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rolling",
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                 "error_cb": lambda error: error.fatal() and errors.append(
                                     ("consume", error))})
            consumer.assign([TopicPartition(t, p, 0) for t, p in everywhere])
            while not stop_consuming.is_set():
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error():
                    errors.append(("consume", message.error()))
                    continue
                consumed[(message.topic(), message.partition())].append(message.value())
            consumer.close()

        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for thread in threads:
            thread.start()
        try:
            order = list(cluster.brokers) if restarted == "every-node" else \
                [cluster.active_controller()]
            for node in order:
                time.sleep(2)
                cluster.restart(node)
                cluster.wait_formed(60)
            time.sleep(2)
        finally:
            stop_producing.set()
            threads[0].join(150)
            total = sum(len(v) for v in acked.values())
            deadline = time.monotonic() + 90
            while sum(len(v) for v in consumed.values()) < total and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1)                      # anything more would be a duplicate
            stop_consuming.set()
            threads[1].join(30)
        assert not errors, errors[:5]
        assert total > 100 * len(order), total
        assert consumed == acked               # nothing lost, duplicated or reordered
        print(f"rolling restart of nodes {order}: {total} records acknowledged and consumed, no errors")


def test_a_topic_deleted_while_a_node_was_down_leaves_its_disk(tmp_path):
    """The restarted node removes the deleted topic's logs once caught up, keeps the others, and
    does not mistake its not-yet-replayed metadata for a lost one."""
    with running_cluster(tmp_path, nodes=3) as cluster:
        for topic in ("doomed", "kept"):
            _create_topic(cluster.bootstrap, topic, 2, replication=3)
        cluster.wait_until(lambda: len(_leaders(cluster, 1, "doomed")) == 2
                           and len(_leaders(cluster, 1, "kept")) == 2, 20, "the topics")
        _produce_and_consume(cluster.bootstrap, "doomed", 2, count=20)
        data_dir = cluster.nodes[3].data_dir
        cluster.wait_until(lambda: os.path.isdir(os.path.join(data_dir, "doomed-0")), 20,
                           "node 3's replica of doomed-0")
        cluster.stop(3)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.nodes[1].port}"})
        admin.delete_topics(["doomed"])["doomed"].result(30)
        cluster.restart(3)
        cluster.wait_until(lambda: not os.path.exists(os.path.join(data_dir, "doomed-0"))
                           and not os.path.exists(os.path.join(data_dir, "doomed-1")), 30,
                           "node 3's doomed logs deleted")
        assert os.path.isdir(os.path.join(data_dir, "kept-0"))
        assert "metadata log is empty" not in cluster.nodes[3].log()
