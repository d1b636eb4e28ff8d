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
        leaders = _leaders(cluster, 1, topic)
        assert sorted(set(leaders.values())) == [1, 2, 3]
        for broker in cluster.brokers:
            assert _leaders(cluster, broker, topic) == leaders
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
        # (RF=1 partitions placed on the dead broker before it is fenced stay offline, as in Kafka.)
        cluster.wait_until(lambda: len(_leaders(cluster, survivors[1], "after-failover")) == 2,
                           20, "the new topic on the other survivor")


def test_a_killed_broker_is_fenced_and_loses_its_partitions(tmp_path):
    metrics_ports = {c: free_port() for c in (1, 2, 3)}
    settings = {4: {"broker.rack": "r1"}, 5: {"broker.rack": "r2"}, 6: {"broker.rack": "r2"},
                **{c: {"metrics.port": str(port)} for c, port in metrics_ports.items()}}
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
        victim = 6
        led = [p for p, b in _leaders(cluster, 4, "fragile").items() if b == victim]
        assert led, _leaders(cluster, 4, "fragile")
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
            [(4, "r1", "unfenced"), (5, "r2", "unfenced"), (6, "r2", "fenced")]
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


@pytest.mark.slow
def test_rolling_restart_of_every_node_loses_nothing(tmp_path):
    """Every node restarted in turn (SIGTERM: controlled shutdown) while a producer and a consumer
    run: no delivery error, every acknowledged record consumed once, in order per partition. With
    RF=1 a restarting node's partitions wait for it (the clients retry), they do not move."""
    import threading

    with running_cluster(tmp_path, nodes=3) as cluster:
        topic, partitions = "rolling", 6
        _create_topic(cluster.bootstrap, topic, partitions)
        stop = threading.Event()
        acked, errors = {p: [] for p in range(partitions)}, []

        def on_delivery(error, message):
            if error is not None:
                errors.append(error)
            else:
                acked[message.partition()].append(message.value())

        def produce():
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5,
                                 "enable.idempotence": True})
            i = 0
            while not stop.is_set():
                producer.produce(topic, b"%08d" % i, partition=i % partitions,
                                 on_delivery=on_delivery)
                producer.poll(0)
                i += 1
                time.sleep(0.005)
            assert producer.flush(120) == 0
        producing = threading.Thread(target=produce)
        producing.start()
        try:
            for node in cluster.brokers:
                time.sleep(1)
                cluster.restart(node)
                cluster.wait_formed(60)
            time.sleep(1)
        finally:
            stop.set()
            producing.join(150)
        assert not errors, errors[:5]
        total = sum(len(v) for v in acked.values())
        assert total > 100
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rolling",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while sum(len(v) for v in got.values()) < total and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got[message.partition()].append(message.value())
        consumer.close()
        assert got == acked
