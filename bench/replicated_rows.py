"""The replicated rows of `python -m bench`: three Odradek nodes against three Kafka nodes
(bench/clusters.py), replication factor 3, acks=all, min.insync.replicas=2, in the same run.

The workloads are the single-node ones (bench/suite.py) on RF 3 topics: batched produce of 100 B and
1 KiB records with acks=all, consume from earliest, and end-to-end latency at a fixed rate. The CPU
column is the whole cluster's (three processes) per record.
"""

from __future__ import annotations

from bench.targets import Target

TARGETS = ("odradek-rf3", "kafka-rf3")
PREFIX = "replicated: "
NOTE = "3 nodes each, RF 3, min.insync.replicas=2"


def build_replicated_cases(suite) -> list:
    from bench.suite import BATCHED, KIB, THROUGHPUT, Case, _consume_case, _latency_case

    s = suite.settings

    def produce_case(label: str, size: int) -> Case:
        def run(target: Target) -> dict[str, float]:
            with suite._topic(target, f"rf3-{size}", s.partitions) as topic:
                return suite.produce_run(target, topic, size, {**BATCHED, "acks": "all"})

        return Case(f"{PREFIX}produce batched {label} acks=all ({NOTE})", run, THROUGHPUT, targets=TARGETS)

    return [produce_case("100 B", 100), produce_case("1 KiB", KIB),
            _consume_case(suite, targets=TARGETS, prefix=PREFIX),
            _latency_case(suite, targets=TARGETS, prefix=PREFIX)]
