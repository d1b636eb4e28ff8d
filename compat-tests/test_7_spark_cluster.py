"""Scenario 7 (cluster): the shipped PySpark pipeline keeps running, exactly, through a broker's death.

A 3-node Odradek cluster (real `odradek serve` processes, broker.testing_cluster) holds the pipeline's
topics with replication factor 3 and min.insync.replicas=2. The streaming job runs; one broker (the
leader of the output topic's first partition, so Spark's producer and consumer both lose a leader) is
killed with SIGKILL while orders keep arriving, stays down while the query goes on, and is restarted;
more orders follow. The same query, never restarted, must end with the output table equal to the
plain-Python totals, and the restarted broker must be back in every partition's ISR.

The default run kills and restarts one broker over a short input; `-m slow` runs a longer input through
two successive kills (the leader of the output, then of the orders topic).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from broker.admin.client import KafkaClient, KafkaError
from odradek_compat import brokers
from odradek_compat.checks import Step
from odradek_compat.spark import SparkName, wait_until

SCENARIO = "7 spark"
REQUEST_TIMED_OUT = 7
pytestmark = pytest.mark.parametrize("client", ["spark"])
CLUSTER_SETTINGS = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    # a dead broker is fenced (its leaderships move) within a few seconds
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
}


@pytest.fixture
def cluster(tmp_path):
    if brokers.external_bootstrap() or os.environ.get("COMPAT_BROKER_CMD"):
        pytest.skip("starts its own 3-node Odradek cluster (COMPAT_BOOTSTRAP/COMPAT_BROKER_CMD is set)")
    from broker.testing_cluster import running_cluster
    (tmp_path / "cluster").mkdir()
    with running_cluster(tmp_path / "cluster", nodes=3, overrides=CLUSTER_SETTINGS, timeout=120) as running:
        yield running


def _partitions(cluster, topic: str):
    """{partition: (leader, replicas, isr)} as a running broker's metadata says."""
    for node_id in cluster.brokers:
        if cluster.nodes[node_id].running:
            response = cluster.metadata(node_id, [topic])
            return {p.partition_index: (p.leader_id, sorted(p.replica_nodes), sorted(p.isr_nodes))
                    for p in response.topics[0].partitions}
    raise AssertionError("no broker is running")


def _fully_replicated(cluster, *topics) -> bool:
    return all(leader >= 0 and isr == [1, 2, 3]
               for topic in topics for leader, _, isr in _partitions(cluster, topic).values())


def _ensure_topics(cluster, ensure_topics, topics, timeout: float = 180.0) -> None:
    """The pipeline's own topic set-up, retried as Kafka's admin clients retry REQUEST_TIMED_OUT
    (a loaded machine can keep the young quorum busy past one CreateTopics timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with KafkaClient(cluster.bootstrap) as kafka:
                ensure_topics(kafka, **topics)
            return
        except (SystemExit, KafkaError) as exc:   # the broker's or this client's timeout
            timed_out = "answered in time" in str(exc) or getattr(exc, "code", None) == REQUEST_TIMED_OUT
            if not timed_out or time.monotonic() > deadline:
                raise
            time.sleep(1)


def _producer(cluster):
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "message.timeout.ms": 120000})


def _feed(producer, topic: str, orders) -> None:
    """Keyed by order id, timestamped with the event time; every record acknowledged (acks=all)."""
    failures = []
    for order in orders:
        producer.produce(topic, order.to_json(), order.order_id.encode(), timestamp=order.event_time_ms,
                         on_delivery=lambda err, _msg: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(150) == 0 and not failures, f"orders not acknowledged: {failures[:3]}"


def _consumed(query, topic: str) -> int:
    """How many orders the running query has read so far (its last micro-batch's end offsets)."""
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return 0
    end = progress["sources"][0].get("endOffset")
    end = json.loads(end) if isinstance(end, str) else end
    return sum((end or {}).get(topic, {}).values())


def _run(spark, cluster, tmp_path, *, orders_count: int, victims: list[str], seed: int):
    from pipelines import streaming
    from pipelines.events import generate, latest_products, window_totals
    from pipelines.kafka_io import ensure_topics, read_table, send_products

    step = Step(SparkName)
    topics = {kind: f"cluster-{kind}-{seed}" for kind in ("orders", "products", "output")}
    _ensure_topics(cluster, ensure_topics, topics)
    cluster.wait_until(lambda: _fully_replicated(cluster, *topics.values()), 60, "every partition on 3 replicas")
    step("every pipeline partition has 3 replicas", {3},
         {len(replicas) for t in topics.values() for _, replicas, _ in _partitions(cluster, t).values()})

    first, renamed, orders = generate(orders_count, seed=seed, start_ms=int(time.time() * 1000) - 3_600_000)
    expected = window_totals(orders, latest_products(first, renamed))
    chunks = [orders[i * len(orders) // (2 * len(victims) + 1):(i + 1) * len(orders) // (2 * len(victims) + 1)]
              for i in range(2 * len(victims) + 1)]
    with KafkaClient(cluster.bootstrap) as kafka:
        send_products(kafka, topics["products"], first + renamed)
    producer = _producer(cluster)
    _feed(producer, topics["orders"], chunks[0])

    query = streaming.start(spark, cluster.bootstrap, orders_topic=topics["orders"],
                            products_topic=topics["products"], output_topic=topics["output"],
                            checkpoint=str(tmp_path / f"checkpoint-{seed}"), trigger_seconds=0.5,
                            max_offsets_per_trigger=max(50, orders_count // 12))
    figures = {}
    try:
        started = time.monotonic()
        wait_until(lambda: _consumed(query, topics["orders"]) > 0, 240, "the first micro-batch", query)
        figures["first micro-batch s"] = round(time.monotonic() - started, 1)
        fed = len(chunks[0])
        for round_, victim_topic in enumerate(victims):
            victim = _partitions(cluster, topics[victim_topic])[0][0]
            cluster.kill(victim)
            killed_at = time.monotonic()
            # orders keep arriving while the broker is dead; the query must read them from the new leaders
            _feed(producer, topics["orders"], chunks[1 + 2 * round_])
            fed += len(chunks[1 + 2 * round_])
            wait_until(lambda: _consumed(query, topics["orders"]) >= fed, 240,
                       f"the query to read every order while broker {victim} is dead", query)
            figures[f"kill {round_ + 1}: broker {victim} (leader of {victim_topic}-0), orders read while down"] = \
                _consumed(query, topics["orders"])
            figures[f"kill {round_ + 1}: down for s"] = round(time.monotonic() - killed_at, 1)
            cluster.start(victim)
            back = time.monotonic()
            cluster.wait_started([victim], 120)
            cluster.wait_until(lambda: _fully_replicated(cluster, *topics.values()), 120,
                               f"broker {victim} back in every ISR")
            figures[f"kill {round_ + 1}: back in every ISR after s"] = round(time.monotonic() - back, 1)
            _feed(producer, topics["orders"], chunks[2 + 2 * round_])
            fed += len(chunks[2 + 2 * round_])
        converging = time.monotonic()
        with KafkaClient(cluster.bootstrap) as kafka:
            wait_until(lambda: read_table(kafka, topics["output"]) == expected, 300,
                       "the output table converging to the plain-Python totals", query)
            figures["converged after the last feed s"] = round(time.monotonic() - converging, 1)
            step("the same query ran throughout (never failed or stopped)", (True, None),
                 (query.isActive, query.exception()))
            step("output table equals plain Python", expected, read_table(kafka, topics["output"]))
    finally:
        query.stop()
    figures.update(orders=orders_count, windows=len(expected))
    print(f"\nspark on the cluster: {figures}")
    return figures


@pytest.mark.timeout(900)
def test_pipeline_survives_a_broker_killed_and_restarted(spark, cluster, tmp_path, client):
    _run(spark, cluster, tmp_path, orders_count=600, victims=["output"], seed=21)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_pipeline_survives_two_brokers_killed_in_turn(spark, cluster, tmp_path, client):
    _run(spark, cluster, tmp_path, orders_count=3000, victims=["output", "orders"], seed=22)
