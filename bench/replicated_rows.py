"""The replicated rows of `python -m bench`: three Odradek nodes against three Kafka nodes
(bench/clusters.py), replication factor 3, acks=all, min.insync.replicas=2, in the same run.

The workloads are the single-node ones (bench/suite.py) on RF 3 topics: batched produce of 100 B and
1 KiB records with acks=all, consume from earliest, and end-to-end latency at a fixed rate. The CPU
column is the whole cluster's (three processes) per record; the produce rows also split it by node:
with two partitions on three nodes, two nodes each lead one partition (and follow the other) and one
node only follows, so "follower-only node" is what following two partitions costs and "each leading
node" what leading one and following one costs.
"""

from __future__ import annotations

import os

from bench.targets import Target

TARGETS = ("odradek-rf3", "kafka-rf3")
PREFIX = "replicated: "
NOTE = "3 nodes each, RF 3, min.insync.replicas=2"
LEADER_CPU = "CPU µs/record, each leading node"
FOLLOWER_CPU = "CPU µs/record, follower-only node"


def build_replicated_cases(suite) -> list:
    from bench.suite import BATCHED, CPU_METRIC, KIB, THROUGHPUT, Case, _consume_case, _latency_case

    s = suite.settings

    def produce_case(label: str, size: int) -> Case:
        def run(target: Target) -> dict[str, float]:
            with suite._topic(target, f"rf3-{size}", s.partitions) as topic:
                os.sync()  # the other cluster's writes are written back now, not during this round
                before = target.node_cpu_seconds()
                values = suite.produce_run(target, topic, size, {**BATCHED, "acks": "all"})
                after = target.node_cpu_seconds()
                leaders = _leaders(suite, target, topic)
            values.update(_split_by_role(before, after, leaders, values.get(CPU_METRIC)))
            return values

        return Case(f"{PREFIX}produce batched {label} acks=all ({NOTE})", run,
                    THROUGHPUT + [(LEADER_CPU, False), (FOLLOWER_CPU, False)], targets=TARGETS)

    return [produce_case("100 B", 100), produce_case("1 KiB", KIB),
            _consume_case(suite, targets=TARGETS, prefix=PREFIX),
            _latency_case(suite, targets=TARGETS, prefix=PREFIX)]


def _leaders(suite, target: Target, topic: str) -> set[int]:
    metadata = suite._admin(target).list_topics(topic, timeout=10).topics[topic]
    return {partition.leader for partition in metadata.partitions.values()}


def _split_by_role(before: dict, after: dict, leaders: set[int], cpu_per_record: float | None) -> dict[str, float]:
    """The cluster's CPU per record, shared out by each node's part of the CPU time used."""
    if cpu_per_record is None or None in before.values() or None in after.values():
        return {}
    used = {node: after[node] - before[node] for node in before}
    total = sum(used.values())
    if total <= 0:
        return {}
    per_node = {node: cpu_per_record * spent / total for node, spent in used.items()}
    leading = [value for node, value in per_node.items() if node in leaders]
    following = [value for node, value in per_node.items() if node not in leaders]
    values = {}
    if leading:
        values[LEADER_CPU] = sum(leading) / len(leading)
    if following:
        values[FOLLOWER_CPU] = sum(following) / len(following)
    return values
