"""``odradek cluster describe`` (DescribeCluster, falling back to Metadata), ``odradek cluster
api-versions`` and ``odradek quorum describe`` (DescribeQuorum on ``__cluster_metadata``)."""

from __future__ import annotations

import argparse
import time

from protocol import messages

from broker.admin.client import API, KafkaClient, KafkaError, _api_name, check
from broker.admin.common import runs
from broker.admin.output import emit_json, table

METADATA_TOPIC = "__cluster_metadata"


def describe_cluster(client: KafkaClient) -> dict:
    conn = client.any_broker()
    if conn.supports(API.DESCRIBE_CLUSTER):
        with_fenced = conn.api_versions[API.DESCRIBE_CLUSTER][1] >= 2
        version, resp = conn.request(API.DESCRIBE_CLUSTER,
                                     messages.DescribeClusterRequest(
                                         include_cluster_authorized_operations=False,
                                         include_fenced_brokers=with_fenced), max_version=2)
        check(resp.error_code, resp.error_message, "DescribeCluster")
        # v2 (KIP-1073) lists fenced brokers too; older versions only the live ones.
        brokers = [{"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
                    "status": ("fenced" if b.is_fenced else "unfenced") if version >= 2
                    else "unfenced"} for b in resp.brokers]
        cluster_id, controller = resp.cluster_id, resp.controller_id
    else:
        meta = client.metadata([])
        brokers = [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                    "status": "unfenced"} for b in meta.brokers.values()]
        cluster_id, controller = meta.cluster_id, meta.controller_id
    return {"cluster_id": cluster_id, "controller_id": controller,
            "brokers": sorted(brokers, key=lambda b: b["id"])}


def describe_quorum(client: KafkaClient) -> dict:
    req = messages.DescribeQuorumRequest
    body = req(topics=[req.TopicData(topic_name=METADATA_TOPIC,
                                      partitions=[req.PartitionData(partition_index=0)])])
    version, resp = client.any_broker().request(API.DESCRIBE_QUORUM, body, max_version=2)
    check(resp.error_code, getattr(resp, "error_message", None), "DescribeQuorum")
    (topic,) = resp.topics
    (p,) = topic.partitions
    check(p.error_code, getattr(p, "error_message", None), "DescribeQuorum")
    now_ms = int(time.time() * 1000)

    def replica(r, role: str) -> dict:
        last_fetch = getattr(r, "last_fetch_timestamp", -1)
        caught_up = getattr(r, "last_caught_up_timestamp", -1)
        return {"node_id": r.replica_id, "role": role, "log_end_offset": r.log_end_offset,
                "lag": max(0, p.high_watermark - r.log_end_offset) if r.log_end_offset >= 0
                else None,
                "last_fetch_ms_ago": now_ms - last_fetch if last_fetch >= 0 else None,
                "last_caught_up_ms_ago": now_ms - caught_up if caught_up >= 0 else None}

    replicas = [replica(r, "Leader" if r.replica_id == p.leader_id else "Follower")
                for r in p.current_voters]
    replicas += [replica(r, "Observer") for r in p.observers]
    return {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch,
            "high_watermark": p.high_watermark,
            "voters": [r.replica_id for r in p.current_voters],
            "observers": [r.replica_id for r in p.observers],
            "max_follower_lag": max((r["lag"] or 0 for r in replicas), default=0),
            "replicas": replicas}


# --------------------------------------------------------------------------- commands

def _cluster_describe(client: KafkaClient, args) -> int:
    doc = describe_cluster(client)
    if args.json:
        emit_json(doc)
        return 0
    print(f"Cluster: {doc['cluster_id']}  Controller: {doc['controller_id']}")
    table(["BROKER", "HOST", "PORT", "RACK", "STATUS"],
          [(b["id"], b["host"], b["port"], b["rack"], b["status"]) for b in doc["brokers"]])
    return 0


def _api_versions(client: KafkaClient, args) -> int:
    conn = client.any_broker()
    rows = [{"api_key": k, "name": _api_name(k), "min": lo, "max": hi}
            for k, (lo, hi) in sorted(conn.api_versions.items())]
    if args.json:
        emit_json(rows)
    else:
        table(["KEY", "API", "MIN", "MAX"], [(r["api_key"], r["name"], r["min"], r["max"])
                                             for r in rows])
    return 0


def _quorum_describe(client: KafkaClient, args) -> int:
    doc = describe_quorum(client)
    if args.json:
        emit_json(doc)
        return 0
    print(f"LeaderId: {doc['leader_id']}  LeaderEpoch: {doc['leader_epoch']}  "
          f"HighWatermark: {doc['high_watermark']}  MaxFollowerLag: {doc['max_follower_lag']}  "
          f"CurrentVoters: {doc['voters']}  CurrentObservers: {doc['observers']}")
    table(["NODE", "ROLE", "LOG-END-OFFSET", "LAG", "LAST-FETCH-MS-AGO", "LAST-CAUGHT-UP-MS-AGO"],
          [(r["node_id"], r["role"], r["log_end_offset"], r["lag"], r["last_fetch_ms_ago"],
            r["last_caught_up_ms_ago"]) for r in doc["replicas"]])
    return 0


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    cluster = subparsers.add_parser("cluster", help="cluster id, controller, brokers")
    sub = cluster.add_subparsers(dest="cluster_command", required=True)
    describe = sub.add_parser("describe", parents=[common], help="cluster id, controller, brokers")
    describe.set_defaults(func=runs(_cluster_describe))
    versions = sub.add_parser("api-versions", parents=[common],
                              help="api version ranges the broker advertises")
    versions.set_defaults(func=runs(_api_versions))

    quorum = subparsers.add_parser("quorum", help="the metadata quorum (KRaft)")
    qsub = quorum.add_subparsers(dest="quorum_command", required=True)
    qdescribe = qsub.add_parser("describe", parents=[common],
                                help="leader, epoch, high watermark, voters and their lag")
    qdescribe.set_defaults(func=runs(_quorum_describe))


__all__ = ["describe_cluster", "describe_quorum", "add_commands", "KafkaError"]
