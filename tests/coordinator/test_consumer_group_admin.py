"""`odradek groups list|describe|reset-offsets|delete` on a KIP-848 consumer group (a member joined
with ConsumerGroupHeartbeat over a real socket)."""

from __future__ import annotations

import json

from confluent_kafka.admin import AdminClient, NewTopic

from broker.admin import main
from broker.admin.client import KafkaClient
from broker.testing import running_broker
from protocol import ErrorCode as E
from protocol import messages as m


def test_admin_tool_shows_and_manages_consumer_groups(tmp_path, capsys):
    with running_broker(tmp_path / "data", {"offsets.topic.replication.factor": "1"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(30)

        def cli(*argv):
            code = main([*argv, "-b", broker.bootstrap, "--timeout", "10"])
            out, err = capsys.readouterr()
            return code, out, err

        with KafkaClient(broker.bootstrap, client_id="new-consumer") as client:
            conn = client.coordinator("kip848")
            _, r = conn.request(68, m.ConsumerGroupHeartbeatRequest(
                group_id="kip848", member_id="member-one", member_epoch=0, rebalance_timeout_ms=30000,
                subscribed_topic_names=["orders"], topic_partitions=[]), min_version=1)
            assert r.error_code == E.NONE and r.member_epoch == 1

            code, out, _ = cli("groups", "list", "--json")
            assert code == 0
            (listed,) = [g for g in json.loads(out) if g["group_id"] == "kip848"]
            assert (listed["group_type"], listed["state"], listed["protocol_type"]) == ("consumer", "Stable", "consumer")
            code, out, _ = cli("groups", "describe", "kip848", "--json")
            (group,) = json.loads(out)
            assert (group["group_type"], group["state"], group["protocol"], group["group_epoch"]) == \
                ("consumer", "Stable", "uniform", 1)
            (member,) = group["members"]
            assert (member["member_id"], member["client_id"], member["member_epoch"]) == ("member-one", "new-consumer", 1)
            assert member["assignment"] == member["target_assignment"] == {"orders": [0, 1, 2]}
            assert {o["partition"]: o["member_id"] for o in group["offsets"]} == {0: "member-one", 1: "member-one",
                                                                                   2: "member-one"}
            code, out, _ = cli("groups", "describe", "kip848")
            assert "Type: consumer" in out and "Assignor: uniform" in out and "orders:0,1,2" in out
            code, _, err = cli("groups", "reset-offsets", "kip848", "--all-topics", "--to-earliest", "--execute")
            assert code == 1 and "Stable" in err
            code, _, err = cli("groups", "delete", "kip848")
            assert code == 1 and "NON_EMPTY_GROUP" in err
            _, r = conn.request(68, m.ConsumerGroupHeartbeatRequest(
                group_id="kip848", member_id="member-one", member_epoch=-1), min_version=1)
            assert r.error_code == E.NONE and r.member_epoch == -1

        code, out, _ = cli("groups", "describe", "kip848", "--json")
        (group,) = json.loads(out)
        assert group["state"] == "Empty" and group["members"] == [] and group["group_epoch"] == 2
        code, _, _ = cli("groups", "reset-offsets", "kip848", "--topic", "orders", "--to-latest", "--execute")
        assert code == 0
        code, out, _ = cli("groups", "describe", "kip848", "--json")
        assert {o["partition"]: o["committed"] for o in json.loads(out)[0]["offsets"]} == {0: 0, 1: 0, 2: 0}
        assert cli("groups", "delete", "kip848")[0] == 0
        code, _, err = cli("groups", "describe", "kip848")
        assert code != 0 and "does not exist" in err
