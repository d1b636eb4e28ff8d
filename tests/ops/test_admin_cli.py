"""Every admin subcommand against a running Odradek broker: output, JSON and exit codes."""

import json
import subprocess
import sys
import time

import pytest

from broker.admin import main
from broker.admin.consumer_protocol import murmur2_partition
from broker.testing import running_broker


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("ops-admin") / "data") as broker:
        yield broker


@pytest.fixture
def cli(kafka, capsys):
    """cli(*argv) -> (exit code, stdout, stderr) of one in-process admin command."""

    def run(*argv: str):
        code = main([*argv, "-b", kafka.bootstrap, "--timeout", "10"])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def jcli(cli, *argv):
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_cluster_describe_and_api_versions(cli, kafka):
    doc = jcli(cli, "cluster", "describe")
    assert doc["controller_id"] == 1 and doc["cluster_id"]
    assert doc["brokers"] == [{"id": 1, "host": "127.0.0.1", "port": kafka.port, "rack": None,
                              "status": "unfenced"}]
    code, out, _ = cli("cluster", "describe")
    assert code == 0 and out.startswith(f"Cluster: {doc['cluster_id']}  Controller: 1")
    versions = {row["name"]: row for row in jcli(cli, "cluster", "api-versions")}
    assert versions["ApiVersions"]["min"] == 0 and versions["Produce"]["max"] >= 3


def test_quorum_describe(cli):
    versions = {row["api_key"] for row in jcli(cli, "cluster", "api-versions")}
    code, out, err = cli("quorum", "describe", "--json")
    if 55 in versions:
        assert code == 0, err
        doc = json.loads(out)
        assert doc["leader_id"] == 1 and doc["voters"] == [1] and doc["high_watermark"] >= 0
    else:  # the broker does not offer DescribeQuorum: a clear Kafka error, exit 1
        assert code == 1 and "UNSUPPORTED_VERSION" in err and "DescribeQuorum" in err


def test_topic_lifecycle(cli):
    code, out, err = cli("topics", "create", "orders", "-p", "3", "-c", "retention.ms=3600000")
    assert (code, out, err) == (0, "Created topic orders.\n", "")

    code, _, err = cli("topics", "create", "orders", "-p", "3")
    assert code == 1 and "topic orders: TOPIC_ALREADY_EXISTS" in err
    code, out, _ = cli("topics", "create", "orders", "--if-not-exists")
    assert code == 0 and "TOPIC_ALREADY_EXISTS (ignored)" in out
    code, _, err = cli("topics", "create", "bad/name")
    assert code == 1 and "INVALID_TOPIC_EXCEPTION" in err
    code, out, err = cli("topics", "create", "never", "--validate-only")
    assert code == 0 and "Validated topic never." in out
    assert "never" not in jcli(cli, "topics", "list")

    assert "orders" in jcli(cli, "topics", "list")
    (doc,) = jcli(cli, "topics", "describe", "orders")
    assert doc["partition_count"] == 3 and doc["replication_factor"] == 1
    assert doc["configs"] == {"retention.ms": "3600000"}
    assert [p["leader"] for p in doc["partitions"]] == [1, 1, 1]
    assert all(p["isr"] == [1] and p["replicas"] == [1] for p in doc["partitions"])
    code, out, _ = cli("topics", "describe", "orders")
    assert code == 0 and "PartitionCount: 3" in out and "retention.ms=3600000" in out

    code, out, _ = cli("topics", "alter-configs", "orders", "--set", "cleanup.policy=compact",
                       "--delete", "retention.ms")
    assert code == 0 and "Altered configs of topic orders." in out
    (doc,) = jcli(cli, "topics", "describe", "orders")
    assert doc["configs"] == {"cleanup.policy": "compact"}
    code, _, err = cli("topics", "alter-configs", "orders", "--set", "retention.ms=banana")
    assert code == 1 and "INVALID_CONFIG" in err

    code, out, _ = cli("topics", "add-partitions", "orders", "--total", "5")
    assert code == 0, out
    (doc,) = jcli(cli, "topics", "describe", "orders")
    assert doc["partition_count"] == 5
    code, _, err = cli("topics", "add-partitions", "orders", "--total", "2")
    assert code == 1 and "INVALID_PARTITIONS" in err

    code, out, _ = cli("topics", "delete", "orders")
    assert (code, out) == (0, "Deleted topic orders.\n")
    assert "orders" not in jcli(cli, "topics", "list")
    code, _, err = cli("topics", "delete", "orders")
    assert code == 1 and "topic orders: UNKNOWN_TOPIC_OR_PARTITION" in err
    assert cli("topics", "delete", "orders", "--if-exists")[0] == 0
    code, _, err = cli("topics", "describe", "orders")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_produce_consume_and_offsets(cli):
    assert cli("topics", "create", "events", "-p", "1")[0] == 0
    before = int(time.time() * 1000)
    code, out, err = cli("produce", "events", "-v", "a", "-v", "b", "-v", "c", "-k", "k1",
                         "-H", "trace=42", "-H", "source=test")
    assert (code, out) == (0, "Produced 3 record(s) to events-0 at offsets 0..2.\n"), err
    doc = jcli(cli, "produce", "events", "-v", "d", "-v", "e", "--compression", "gzip")
    assert doc["records"] == 2 and doc["batches"][0]["base_offset"] == 3

    code, out, err = cli("consume", "events", "--from-beginning", "--count", "5",
                         "--print-key", "--print-offset", "--print-headers")
    assert code == 0 and "Processed a total of 5 messages" in err
    lines = out.splitlines()
    assert lines[0] == "0:0\ttrace:42,source:test\tk1\ta"
    assert lines[3] == "0:3\tNO_HEADERS\tnull\td" and len(lines) == 5

    code, out, _ = cli("consume", "events", "--offset", "-2", "--count", "2", "--format", "json")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["value"] for r in records] == ["d", "e"]
    assert [r["offset"] for r in records] == [3, 4] and records[0]["timestamp"] >= before

    # asking for more than there is: the idle timeout ends it with exit status 1
    code, out, err = cli("consume", "events", "--offset", "3", "--count", "5",
                         "--timeout-ms", "300")
    assert code == 1 and out.splitlines() == ["d", "e"]

    rows = jcli(cli, "offsets", "events")
    assert rows == [{"topic": "events", "partition": 0, "earliest": 0, "latest": 5,
                     "error": None}]
    (row,) = jcli(cli, "offsets", "events", "--time", str(before))
    assert row["offset"] == 0 and row["timestamp"] >= before
    (row,) = jcli(cli, "offsets", "events", "--time", "2999-01-01T00:00:00Z")
    assert row["offset"] == -1  # nothing at or after that time
    code, _, err = cli("offsets", "events", "--partition", "7")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err
    code, _, err = cli("offsets", "nosuchtopic")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err

    code, out, _ = cli("delete-records", "events", "--before-offset", "2")
    assert code == 0 and out.splitlines()[1].split() == ["events", "0", "2"]
    assert jcli(cli, "offsets", "events")[0]["earliest"] == 2
    code, out, _ = cli("consume", "events", "--from-beginning", "--count", "1")
    assert out == "c\n"
    code, _, err = cli("delete-records", "events", "--before-offset", "99")
    assert code == 1 and "OFFSET_OUT_OF_RANGE" in err


def test_keys_go_where_the_java_partitioner_puts_them(cli):
    assert cli("topics", "create", "keyed", "-p", "3")[0] == 0
    keys = [f"user-{i}" for i in range(12)]
    lines = "".join(f"{k}:{i}\n" for i, k in enumerate(keys))
    code, out, err = _with_stdin(cli, lines, "produce", "keyed", "--key-separator", ":")
    assert code == 0, err
    for partition in range(3):
        code, out, _ = cli("consume", "keyed", "--partition", str(partition), "--offset",
                           "earliest", "--print-key", "--timeout-ms", "300", "--format", "json")
        got = [json.loads(line)["key"] for line in out.splitlines()]
        assert got == [k for k in keys if murmur2_partition(k.encode(), 3) == partition]
    code, out, err = cli("produce", "keyed", "-v", "x", "--acks", "0", "-p", "1")
    assert code == 0 and "Produced 1 record(s) to keyed-1." in out


def _with_stdin(cli, text, *argv):
    import io

    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        return cli(*argv)
    finally:
        sys.stdin = saved


def test_compressed_batches_round_trip(cli):
    assert cli("topics", "create", "squeezed")[0] == 0
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        assert cli("produce", "squeezed", "-v", codec * 50, "--compression", codec)[0] == 0
    code, out, _ = cli("consume", "squeezed", "--from-beginning", "--count", "4",
                       "--isolation-level", "read_committed")
    assert code == 0 and out.splitlines() == [c * 50 for c in ("gzip", "snappy", "lz4", "zstd")]


def test_groups_describe_lag_reset_and_delete(cli):
    assert cli("topics", "create", "work", "-p", "2")[0] == 0
    assert cli("produce", "work", "-v", "1", "-v", "2", "-v", "3", "-p", "0")[0] == 0
    assert cli("produce", "work", "-v", "4", "-v", "5", "-p", "1")[0] == 0

    code, out, err = cli("consume", "work", "--group", "billing", "--from-beginning",
                         "--count", "5")
    assert code == 0 and sorted(out.split()) == ["1", "2", "3", "4", "5"], err
    listed = {g["group_id"]: g for g in jcli(cli, "groups", "list")}
    assert listed["billing"]["state"] == "Empty" and listed["billing"]["protocol_type"] == "consumer"

    assert cli("produce", "work", "-v", "6", "-v", "7", "-p", "0")[0] == 0
    (group,) = jcli(cli, "groups", "describe", "billing")
    lag = {o["partition"]: (o["committed"], o["log_end_offset"], o["lag"])
           for o in group["offsets"]}
    assert group["state"] == "Empty" and lag == {0: (3, 5, 2), 1: (2, 2, 0)}
    code, out, _ = cli("groups", "describe", "billing")
    assert code == 0 and "Group: billing  State: Empty" in out and "LOG-END-OFFSET" in out

    code, out, err = cli("groups", "reset-offsets", "billing", "--all-topics", "--to-earliest")
    assert code == 0 and "Dry run" in err and out.splitlines()[1].split()[-1] == "0"
    (group,) = jcli(cli, "groups", "describe", "billing")
    assert group["offsets"][0]["committed"] == 3  # dry run changed nothing

    doc = jcli(cli, "groups", "reset-offsets", "billing", "--topic", "work:0", "--to-offset",
               "1", "--execute")
    assert doc["executed"] and [(o["partition"], o["new_offset"]) for o in doc["offsets"]] == [(0, 1)]
    (group,) = jcli(cli, "groups", "describe", "billing")
    assert {o["partition"]: o["lag"] for o in group["offsets"]} == {0: 4, 1: 0}

    doc = jcli(cli, "groups", "reset-offsets", "billing", "--all-topics", "--shift-by", "-5",
               "--execute")
    assert [o["new_offset"] for o in doc["offsets"]] == [0, 0]  # clamped at the log start
    doc = jcli(cli, "groups", "reset-offsets", "billing", "--topic", "work", "--to-latest",
               "--execute")
    assert [o["new_offset"] for o in doc["offsets"]] == [5, 2]
    doc = jcli(cli, "groups", "reset-offsets", "billing", "--topic", "work", "--to-datetime",
               "2000-01-01T00:00:00", "--execute")
    assert [o["new_offset"] for o in doc["offsets"]] == [0, 0]
    code, _, err = cli("groups", "reset-offsets", "billing", "--all-topics")
    assert code == 1 and "--to-earliest" in err  # no target given

    # the group resumes from its committed offsets
    code, out, _ = cli("consume", "work", "--group", "billing", "--count", "7")
    assert code == 0 and sorted(out.split()) == ["1", "2", "3", "4", "5", "6", "7"]

    code, out, _ = cli("groups", "delete", "billing")
    assert (code, out) == (0, "Deleted group billing.\n")
    assert "billing" not in {g["group_id"] for g in jcli(cli, "groups", "list")}
    code, _, err = cli("groups", "delete", "billing")
    assert code == 1 and "GROUP_ID_NOT_FOUND" in err
    code, _, err = cli("groups", "describe", "billing")
    assert code == 1 and "GROUP_ID_NOT_FOUND" in err


def test_configs_describe_and_alter(cli):
    assert cli("topics", "create", "tuned")[0] == 0
    entries = {e["name"]: e for e in jcli(cli, "configs", "describe", "--topic", "tuned", "--all")
               ["configs"]}
    assert entries["cleanup.policy"]["value"] == "delete"
    assert entries["cleanup.policy"]["source"] == "DEFAULT_CONFIG"

    code, out, _ = cli("configs", "alter", "--topic", "tuned", "--set", "retention.ms=60000")
    assert code == 0 and "retention.ms=60000" in out
    doc = jcli(cli, "configs", "describe", "--topic", "tuned")
    assert [(e["name"], e["value"], e["source"]) for e in doc["configs"]] == \
        [("retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG")]
    code, _, err = cli("configs", "alter", "--topic", "tuned", "--set", "no.such.config=1")
    assert code == 1 and "INVALID_CONFIG" in err
    code, _, err = cli("configs", "alter", "--topic", "tuned")
    assert code == 1 and "nothing to alter" in err

    broker = {e["name"]: e for e in jcli(cli, "configs", "describe", "--broker", "1", "--all")
              ["configs"]}
    assert broker["num.partitions"]["value"] == "1"
    code, _, err = cli("configs", "alter", "--broker", "1", "--set", "message.max.bytes=2000000")
    assert code == 0, err
    broker = {e["name"]: e for e in jcli(cli, "configs", "describe", "--broker", "1")["configs"]}
    assert broker["message.max.bytes"]["value"] == "2000000"
    assert broker["message.max.bytes"]["source"] == "DYNAMIC_BROKER_CONFIG"
    assert cli("configs", "alter", "--broker", "1", "--delete", "message.max.bytes")[0] == 0
    assert jcli(cli, "configs", "describe", "--broker", "1")["configs"] == []
    loggers = {e["name"]: e for e in jcli(cli, "configs", "describe", "--broker-logger", "1")
               ["configs"]}
    assert "root" in loggers and loggers["root"]["source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
    code, _, err = cli("configs", "describe", "--topic", "missing-topic")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_module_entry_point_exit_codes(kafka):
    """``python -m broker.admin`` as a script: 0 on success, 1 on a Kafka error, 2 on usage."""
    def run(*argv):
        return subprocess.run([sys.executable, "-m", "broker.admin", *argv], capture_output=True,
                              text=True, timeout=60)

    ok = run("topics", "list", "-b", kafka.bootstrap)
    assert ok.returncode == 0, ok.stderr
    missing = run("topics", "describe", "no-such-topic", "-b", kafka.bootstrap)
    assert missing.returncode == 1
    assert missing.stderr.startswith("odradek: error: topic no-such-topic: "
                                     "UNKNOWN_TOPIC_OR_PARTITION")
    usage = run("topics", "create")
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_odradek_entry_point_runs_the_admin_tools(kafka, capsys):
    from broker.cli import main as odradek

    assert odradek(["cluster", "describe", "-b", kafka.bootstrap, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["controller_id"] == 1


def test_produce_json_lines_round_trip_through_consume_json(cli):
    assert cli("topics", "create", "jsonl")[0] == 0
    lines = ('{"key": "a", "value": "one", "headers": {"h": "1"}, "timestamp": 1700000000000}\n'
             '{"value": {"nested": true}}\n'
             '{"key": "gone", "value": null}\n')
    code, out, err = _with_stdin(cli, lines, "produce", "jsonl", "--input-format", "json")
    assert code == 0 and "Produced 3 record(s) to jsonl-0 at offsets 0..2." in out, err
    code, out, _ = cli("consume", "jsonl", "-o", "earliest", "--count", "3", "--json")
    got = [json.loads(line) for line in out.splitlines()]
    assert [(r["key"], r["value"], r["headers"]) for r in got] == [
        ("a", "one", {"h": "1"}), (None, '{"nested": true}', {}), ("gone", None, {})]
    assert got[0]["timestamp"] == 1700000000000
    code, _, err = _with_stdin(cli, "not json\n", "produce", "jsonl", "--input-format", "json")
    assert code == 1 and "not JSON" in err


def test_read_committed_skips_aborted_transactions(cli, kafka):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    assert cli("topics", "create", "txns")[0] == 0
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap,
                                         "transactional.id": "ops-txn", "log_level": 3})
    producer.init_transactions(10)
    for value, commit in ((b"committed-1", True), (b"aborted", False), (b"committed-2", True)):
        producer.begin_transaction()
        producer.produce("txns", value=value)
        producer.flush(10)
        (producer.commit_transaction if commit else producer.abort_transaction)(10)

    code, out, _ = cli("consume", "txns", "-o", "earliest", "--timeout-ms", "500")
    assert out.splitlines() == ["committed-1", "aborted", "committed-2"]
    code, out, _ = cli("consume", "txns", "-o", "earliest", "--count", "2",
                       "--isolation-level", "read_committed", "--print-offset")
    assert code == 0 and out.splitlines() == ["0:0\tcommitted-1", "0:4\tcommitted-2"]
    (row,) = jcli(cli, "offsets", "txns", "--isolation-level", "read_committed")
    assert row["latest"] == 6  # markers included: three batches, three markers


def test_describe_an_active_group_and_refuse_to_reset_it(cli, kafka):
    from broker.admin.client import KafkaClient
    from broker.admin.consumer import GroupMember

    assert cli("topics", "create", "live", "-p", "3")[0] == 0
    with KafkaClient(kafka.bootstrap, client_id="live-consumer") as client:
        member = GroupMember(client, "live-group", ["live"])
        assert member.join() == {"live": [0, 1, 2]}
        member.commit({("live", 1): 0})
        try:
            (group,) = jcli(cli, "groups", "describe", "live-group")
            assert group["state"] == "Stable" and group["protocol"] == "range"
            (m,) = group["members"]
            assert m["member_id"] == member.member_id and m["client_id"] == "live-consumer"
            assert m["assignment"] == {"live": [0, 1, 2]}
            owners = {o["partition"]: o["member_id"] for o in group["offsets"]}
            assert owners == {0: member.member_id, 1: member.member_id, 2: member.member_id}
            code, out, _ = cli("groups", "describe", "live-group")
            assert "live:0,1,2" in out and "live-consumer" in out

            code, _, err = cli("groups", "reset-offsets", "live-group", "--all-topics",
                               "--to-earliest", "--execute")
            assert code == 1 and "inactive" in err and "Stable" in err
            code, _, err = cli("groups", "delete", "live-group")
            assert code == 1 and "NON_EMPTY_GROUP" in err
        finally:
            member.leave()
    (group,) = jcli(cli, "groups", "describe", "live-group")
    assert group["state"] == "Empty" and group["members"] == []


def test_two_members_rebalance_and_split_the_partitions(cli, kafka):
    import threading

    from broker.admin.client import KafkaClient
    from broker.admin.consumer import GroupMember

    assert cli("topics", "create", "shared", "-p", "4")[0] == 0
    with KafkaClient(kafka.bootstrap) as c1, KafkaClient(kafka.bootstrap) as c2:
        first = GroupMember(c1, "pair", ["shared"], session_timeout_ms=6000)
        assert first.join() == {"shared": [0, 1, 2, 3]}
        second = GroupMember(c2, "pair", ["shared"], session_timeout_ms=6000)
        failures = []

        def join_second():
            try:
                second.join()
            except Exception as exc:  # reported below, not lost with the thread
                failures.append(exc)

        joined = threading.Thread(target=join_second, daemon=True)
        joined.start()
        deadline = time.monotonic() + 30
        while first.heartbeat_if_due() and time.monotonic() < deadline:
            time.sleep(0.1)  # the first member learns of the rebalance from its heartbeat
        first.join()
        joined.join(30)
        assert not joined.is_alive() and not failures, failures
        assert sorted(first.assignment["shared"] + second.assignment["shared"]) == [0, 1, 2, 3]
        assert len(first.assignment["shared"]) == len(second.assignment["shared"]) == 2
        (group,) = jcli(cli, "groups", "describe", "pair")
        assert group["state"] == "Stable" and len(group["members"]) == 2
        second.leave()
        first.leave()


def test_produce_auto_creates_topics_like_kafka_producers(cli):
    code, out, err = cli("produce", "born-on-write", "-v", "hello")
    assert code == 0 and "Produced 1 record(s) to born-on-write-0 at offsets 0..0." in out, err
    assert "born-on-write" in jcli(cli, "topics", "list")
    code, _, err = cli("consume", "never-written", "--count", "1", "--timeout-ms", "200")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err  # consumers do not create topics


def test_console_tools_run_outside_the_main_thread(cli):
    import threading

    assert cli("produce", "threaded", "-v", "c")[0] == 0
    results = []
    worker = threading.Thread(target=lambda: results.append(
        cli("consume", "threaded", "-o", "earliest", "--count", "1")))
    worker.start()
    worker.join(30)
    assert results and results[0][0] == 0 and results[0][1] == "c\n"
