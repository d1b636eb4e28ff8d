"""Scenario 1: metadata; create a topic with partitions and configs, describe configs, add partitions,
delete it; DescribeCluster."""

import pytest

from odradek_compat.checks import Step, wait_until
from odradek_compat.clients import ClientError

SCENARIO = "1 admin"


def test_metadata_and_describe_cluster(client, broker):
    step = Step(client)
    md = client.metadata()
    # Every broker of the bootstrap list (one broker, or each node of a COMPAT_CLUSTER run).
    expected = [(host, int(port)) for host, port in
                (address.rsplit(":", 1) for address in broker["bootstrap"].split(","))]
    step("brokers advertised", expected, [(b["host"], b["port"]) for b in md["brokers"]])
    if client.reports_cluster_id:
        step("cluster id", "a non-empty string", md["cluster_id"],
             ok=isinstance(md["cluster_id"], str) and md["cluster_id"] != "")
    step("controller is a known broker", [b["id"] for b in md["brokers"]], md["controller_id"],
         ok=md["controller_id"] in [b["id"] for b in md["brokers"]])

def test_create_describe_extend_delete(client, names):
    step = Step(client)
    topic = names("admin")
    configs = {"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "200000"}
    client.create_topic(topic, 3, configs)
    count = wait_until("partitions", lambda: _count_or_none(client, topic), lambda n: n == 3, 15)
    step("partition count after create", 3, count)

    described = client.describe_configs(topic)
    step("described configs", configs, {k: described.get(k) for k in configs})

    client.create_partitions(topic, 5)
    count = wait_until("partitions", lambda: _count_or_none(client, topic), lambda n: n == 5, 15)
    step("partition count after CreatePartitions", 5, count)

    with pytest.raises(ClientError) as duplicate:
        client.create_topic(topic, 1)
    step("error creating an existing topic", "TopicExists / TOPIC_ALREADY_EXISTS", str(duplicate.value),
         ok=any(s in str(duplicate.value).lower().replace("_", "") for s in ("topicexists", "topicalreadyexists",
                                                                            "already exists")))

    client.delete_topic(topic)
    listed = wait_until("deleted", lambda: client.metadata()["topics"], lambda ts: topic not in ts, 15)
    step("topic gone after delete", f"{topic} not listed", listed, ok=topic not in listed)


def _count_or_none(client, topic):
    try:
        return client.partition_count(topic)
    except ClientError:
        return None
