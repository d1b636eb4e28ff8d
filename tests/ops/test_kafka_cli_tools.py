"""Kafka's own command-line tools (the classes behind kafka-configs.sh, kafka-acls.sh,
kafka-broker-api-versions.sh, kafka-console-producer.sh and kafka-dump-log.sh, from Apache Kafka
3.9's jars) against an `odradek serve` process, their output checked line by line.

The same checks run against Apache Kafka 3.9 itself in the slow variant (`-m slow`), which is
how each expectation here was proved to be Kafka's behaviour. FeatureCommand, ClusterTool and
EndToEndLatency are not here: Kafka 3.9 keeps them in its tools jar, which the reference build
lacks (kafka.tools.ClusterTool only forwards to the missing class).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from tests import apache_kafka as oracle

LIBS = oracle.kafka_home() / "libs" if oracle.kafka_home() else None
# The broker settings both targets run with: ACLs on, everyone allowed where no ACL matches, and
# the tools' own (anonymous) principal a super user so ACLs on the cluster do not lock it out.
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true", "super.users": "User:ANONYMOUS"}
QUIET_LOG4J = """status = error
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%p] %m%n
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = STDERR
"""


def _skip_reason() -> str | None:
    if shutil.which("java") is None:
        return "no java on PATH to run Kafka's command-line tools"
    if LIBS is None or not (LIBS / "kafka_2.13-3.9.0.jar").is_file():
        return "no Apache Kafka 3.9 jars (set APACHE_KAFKA_HOME or put them in ../shared/apache-kafka)"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


class Target(NamedTuple):
    name: str
    bootstrap: str
    log_dir: Path        # where the partition directories are


class Result(NamedTuple):
    code: int
    out: str


def _odradek_serve(tmp: Path):
    """An `odradek serve` process on a free port; yields a Target, stops it with SIGTERM."""
    command = [sys.executable, "-c", "import sys; from broker.cli import main; sys.exit(main())",
               "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
               "--override", f"log.dirs={tmp / 'data'}", "--override", "num.partitions=1"]
    for key, value in AUTHORIZER.items():
        command += ["--override", f"{key}={value}"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        line = proc.stdout.readline()
        assert line.startswith("odradek: listening on PLAINTEXT://"), line
        yield Target("odradek", line.split()[3].removeprefix("PLAINTEXT://"), tmp / "data")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _apache_kafka(tmp: Path):
    kafka = oracle.ApacheKafka(tmp)
    previous = os.environ.get("KAFKA_EXTRA_PROPS")
    os.environ["KAFKA_EXTRA_PROPS"] = " ".join(f"{k}={v}" for k, v in AUTHORIZER.items())
    try:
        kafka.start()
    finally:
        if previous is None:
            del os.environ["KAFKA_EXTRA_PROPS"]
        else:
            os.environ["KAFKA_EXTRA_PROPS"] = previous
    try:
        yield Target("kafka", kafka.bootstrap, tmp / "data" / "kraft-logs")
    finally:
        kafka.stop()


@pytest.fixture(scope="module", params=["odradek", pytest.param("kafka", marks=pytest.mark.slow)])
def target(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"cli-{request.param}")
    start = _odradek_serve if request.param == "odradek" else _apache_kafka
    yield from start(tmp)


@pytest.fixture(scope="module")
def tool(target, tmp_path_factory):
    """tool(CLASS, *args, stdin=None) runs one of Kafka's tool classes; "BOOT" in args is the bootstrap."""
    log4j = tmp_path_factory.mktemp("log4j") / "log4j2.properties"
    log4j.write_text(QUIET_LOG4J)

    def run(cls: str, *args: str, stdin: str | None = None) -> Result:
        args = [a.replace("BOOT", target.bootstrap) for a in args]
        done = subprocess.run(
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{LIBS}/*", cls, *args],
            input=stdin, capture_output=True, text=True, timeout=90)
        return Result(done.returncode, done.stdout + done.stderr)
    return run


def _create_topic(target, name: str, **config: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": target.bootstrap})   # alive until the answer is in
    for future in admin.create_topics([NewTopic(name, 1, 1, config=config)]).values():
        future.result(timeout=30)


def _config_lines(out: str) -> dict[str, str]:
    """kafka-configs --describe: {header: "name=value sensitive=... synonyms={...}" lines}."""
    sections, header = {}, None
    for line in out.splitlines():
        if line.endswith(" are:"):
            header = line
            sections[header] = []
        elif line.startswith("  ") and header:
            sections[header].append(line.strip())
    return sections


CONFIGS = "kafka.admin.ConfigCommand"


def test_configs_alter_describe_and_delete_on_a_topic(target, tool):
    _create_topic(target, "configured", **{"retention.ms": "3600000"})
    altered = tool(CONFIGS, "--bootstrap-server", "BOOT", "--alter", "--entity-type", "topics",
                   "--entity-name", "configured", "--add-config",
                   "cleanup.policy=[compact,delete],max.message.bytes=2000000",
                   "--delete-config", "retention.ms")
    assert altered == (0, "Completed updating config for topic configured.\n")
    described = tool(CONFIGS, "--bootstrap-server", "BOOT", "--describe", "--entity-type", "topics",
                     "--entity-name", "configured")
    assert described.code == 0, described.out
    assert _config_lines(described.out) == {"Dynamic configs for topic configured are:": [
        "cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "max.message.bytes=2000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "max.message.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588}"]}

    unknown = tool(CONFIGS, "--bootstrap-server", "BOOT", "--alter", "--entity-type", "topics",
                   "--entity-name", "configured", "--add-config", "no.such.config=1")
    assert unknown.code == 1
    assert "InvalidConfigurationException: Unknown topic config name: no.such.config" in unknown.out


def test_configs_on_a_broker_and_the_broker_default(target, tool):
    for entity, config in ((["--entity-name", "1"], "log.cleaner.threads=2,custom.plugin.key=x"),
                           (["--entity-default"], "log.retention.ms=7200000")):
        altered = tool(CONFIGS, "--bootstrap-server", "BOOT", "--alter", "--entity-type", "brokers",
                       *entity, "--add-config", config)
        assert altered.code == 0, altered.out
    described = tool(CONFIGS, "--bootstrap-server", "BOOT", "--describe", "--entity-type", "brokers")
    assert described.code == 0, described.out
    assert _config_lines(described.out) == {
        "Dynamic configs for broker 1 are:": [
            # a key the broker does not know is kept, and shown hidden, as a sensitive one is
            "custom.plugin.key=null sensitive=true synonyms={DYNAMIC_BROKER_CONFIG:custom.plugin.key=null}",
            "log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}"],
        "Default configs for brokers in the cluster are:": [
            "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "log.retention.ms=7200000}"]}

    # kafka-configs replaces a broker's whole set, so a hidden value must be given again
    refused = tool(CONFIGS, "--bootstrap-server", "BOOT", "--alter", "--entity-type", "brokers",
                   "--entity-name", "1", "--delete-config", "log.cleaner.threads")
    assert refused == (1, "All sensitive broker config entries must be specified for --alter, "
                          "missing entries: Set(custom.plugin.key)\n")
    deleted = tool(CONFIGS, "--bootstrap-server", "BOOT", "--alter", "--entity-type", "brokers",
                   "--entity-default", "--delete-config", "log.retention.ms")
    assert deleted == (0, "Completed updating default config for brokers in the cluster.\n")
    static = tool(CONFIGS, "--bootstrap-server", "BOOT", "--alter", "--entity-type", "brokers",
                  "--entity-default", "--add-config", "log.dirs=/elsewhere")
    assert static.code == 1
    assert "InvalidRequestException: Cannot update these configs dynamically: Set(log.dirs)" in static.out


ACL_LINE = re.compile(r"\(principal=(\S+), host=(\S+), operation=(\w+), permissionType=(\w+)\)")


def _acls(out: str) -> set[tuple]:
    """kafka-acls --list: {(resource type, name, pattern type, principal, host, operation, permission)}."""
    acls, resource = set(), None
    for line in out.splitlines():
        found = re.search(r"ResourcePattern\(resourceType=(\w+), name=(.*), patternType=(\w+)\)", line)
        if found:
            resource = found.groups()
        elif (entry := ACL_LINE.search(line)) and resource:
            acls.add(resource + entry.groups())
    return acls


def test_acls_add_list_and_remove(target, tool):
    acls = "kafka.admin.AclCommand"
    for args in (["--allow-principal", "User:alice", "--producer", "--topic", "orders",
                  "--transactional-id", "tx-1", "--idempotent"],
                 ["--deny-principal", "User:eve", "--deny-host", "10.0.0.1", "--operation", "Read",
                  "--topic", "orders-", "--resource-pattern-type", "prefixed"]):
        added = tool(acls, "--bootstrap-server", "BOOT", "--add", *args)
        assert added.code == 0, added.out
    listed = tool(acls, "--bootstrap-server", "BOOT", "--list")
    assert listed.code == 0, listed.out
    alice = {("TOPIC", "orders", "LITERAL", "User:alice", "*", op, "ALLOW")
             for op in ("WRITE", "DESCRIBE", "CREATE")}
    alice |= {("TRANSACTIONAL_ID", "tx-1", "LITERAL", "User:alice", "*", op, "ALLOW")
              for op in ("WRITE", "DESCRIBE")}
    alice.add(("CLUSTER", "kafka-cluster", "LITERAL", "User:alice", "*", "IDEMPOTENT_WRITE", "ALLOW"))
    eve = {("TOPIC", "orders-", "PREFIXED", "User:eve", "10.0.0.1", "READ", "DENY")}
    assert _acls(listed.out) == alice | eve

    matching = tool(acls, "--bootstrap-server", "BOOT", "--list", "--topic", "orders-eu",
                    "--resource-pattern-type", "match")
    assert _acls(matching.out) == eve
    removed = tool(acls, "--bootstrap-server", "BOOT", "--remove", "--force", "--topic", "orders")
    assert removed == (0, "")
    after = tool(acls, "--bootstrap-server", "BOOT", "--list")
    assert _acls(after.out) == {acl for acl in alice | eve if acl[1] != "orders"}


def test_broker_api_versions(target, tool):
    answer = tool("kafka.admin.BrokerApiVersionsCommand", "--bootstrap-server", "BOOT")
    assert answer.code == 0, answer.out
    assert f"{target.bootstrap} (id: 1 rack: null) -> (" in answer.out
    versions = dict(re.findall(r"^\t(\w+\(\d+\)): (.*?),?$", answer.out, re.MULTILINE))
    # what a 3.9 client can use: every API it needs at its newest version
    for api, usable in (("Produce(0)", 11), ("Fetch(1)", 17), ("Metadata(3)", 12),
                        ("OffsetCommit(8)", 9), ("FindCoordinator(10)", 6), ("JoinGroup(11)", 9),
                        ("ApiVersions(18)", 4), ("CreateTopics(19)", 7), ("InitProducerId(22)", 5),
                        ("DescribeAcls(29)", 3), ("DescribeConfigs(32)", 4),
                        ("IncrementalAlterConfigs(44)", 1), ("DescribeTopicPartitions(75)", 0)):
        assert versions[api].endswith(f"[usable: {usable}]"), (api, versions[api])
    for broker_only in ("LeaderAndIsr(4)", "StopReplica(5)", "UpdateMetadata(6)", "Envelope(58)"):
        assert versions[broker_only] == "UNSUPPORTED"


def _read_all(target, topic: str) -> list[tuple]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "cli-reader",
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        records, deadline = [], time.monotonic() + 20
        while len(records) < high - low and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                records.append((message.key(), message.value(), message.headers()))
        return records
    finally:
        consumer.close()


def test_console_producer_then_a_python_consumer(target, tool):
    lines = "h1:a,h2:b|k1:first\nh9:|k2:second:with:colons\nh3:c|k3:\n"
    produced = tool("kafka.tools.ConsoleProducer", "--bootstrap-server", "BOOT", "--topic", "typed",
                    "--request-required-acks", "all", "--compression-codec", "zstd", "--sync",
                    "--property", "parse.key=true", "--property", "key.separator=:",
                    "--property", "parse.headers=true", "--property", "headers.delimiter=|",
                    stdin=lines)
    assert produced == (0, "")
    assert _read_all(target, "typed") == [
        (b"k1", b"first", [("h1", b"a"), ("h2", b"b")]),
        (b"k2", b"second:with:colons", [("h9", b"")]),
        (b"k3", b"", [("h3", b"c")])]


DUMP = "kafka.tools.DumpLogSegments"


@pytest.fixture(scope="module")
def dumped(target):
    """A rolled first segment of `dumped` (keys, headers, lz4), a group's committed offset and a
    committed transaction."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    _create_topic(target, "dumped", **{"segment.bytes": "1048576"})
    _create_topic(target, "dumped-txn")
    producer = Producer({"bootstrap.servers": target.bootstrap, "compression.type": "lz4",
                         "linger.ms": 5})
    for i in range(20):
        producer.produce("dumped", key=b"key-%d" % i, value=b"value-%d" % i, headers=[("h", b"%d" % i)])
    producer.flush(30)
    filler = os.urandom(1 << 20)         # incompressible: the segment rolls after the records above
    for i in range(4):
        producer.produce("dumped", value=filler[i * 300_000:(i + 1) * 300_000])
        producer.flush(30)
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": "dump-group"})
    consumer.commit(offsets=[TopicPartition("dumped", 0, 20)], asynchronous=False)
    consumer.close()
    transactional = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": "dump-txn"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce("dumped-txn", key=b"k", value=b"v")
    transactional.commit_transaction(30)
    return target.log_dir / "dumped-0" / ("0" * 20)


def test_dump_log_segments_reads_our_log_and_indexes(tool, dumped):
    log = tool(DUMP, "--files", f"{dumped}.log", "--deep-iteration", "--print-data-log")
    assert log.code == 0, log.out
    records = re.findall(r"^\| offset: (\d+) CreateTime: \d+ keySize: (\d+) valueSize: (\d+) "
                         r"sequence: -?\d+ headerKeys: \[(\w*)\] key: (\S+) payload: (\S+)$",
                         log.out, re.MULTILINE)
    assert records[:20] == [(str(i), str(len(f"key-{i}")), str(len(f"value-{i}")), "h",
                             f"key-{i}", f"value-{i}") for i in range(20)]
    batches = re.findall(r"^baseOffset: \d+ .* compresscodec: (\w+) crc: \d+ isvalid: (\w+)$",
                         log.out, re.MULTILINE)
    # librdkafka sends a batch uncompressed when lz4 would not make it smaller (one short record)
    assert ("lz4", "true") in batches and {valid for _, valid in batches} == {"true"}, batches

    for flag in ("--index-sanity-check", "--verify-index-only"):
        checked = tool(DUMP, "--files", f"{dumped}.index,{dumped}.timeindex", flag)
        assert checked.code == 0, checked.out
        assert "Exception" not in checked.out and "Mismatches" not in checked.out, checked.out
    sanity = tool(DUMP, "--files", f"{dumped}.index,{dumped}.timeindex", "--index-sanity-check")
    assert f"{dumped}.index passed sanity check." in sanity.out
    assert f"{dumped}.timeindex passed sanity check." in sanity.out


def test_dump_log_segments_decodes_our_consumer_offsets(target, tool, dumped):
    lines = _decoded(tool, target.log_dir.glob("__consumer_offsets-*/*.log"), "--offsets-decoder")
    commits = [line for line in lines if '"group":"dump-group"' in line]
    assert len(commits) == 1, commits
    assert re.search(r'key: \{"type":"1","data":\{"group":"dump-group","topic":"dumped","partition":0\}\} '
                     r'payload: \{"version":"\d","data":\{"offset":20,"leaderEpoch":-1,"metadata":"",'
                     r'"commitTimestamp":\d+(,"expireTimestamp":-?\d+)?\}\}$', commits[0]), commits[0]


def _decoded(tool, segments, decoder: str) -> list[str]:
    """Every record line kafka-dump-log prints for the non-empty `segments` with `decoder`."""
    answers = [tool(DUMP, "--files", str(s), decoder) for s in sorted(segments) if s.stat().st_size]
    assert [a.code for a in answers] == [0] * len(answers), [a.out for a in answers]
    return [line for a in answers for line in a.out.splitlines() if line.startswith("| offset:")]


def test_dump_log_segments_decodes_our_transaction_log(target, tool, dumped):
    lines = _decoded(tool, target.log_dir.glob("__transaction_state-*/*.log"), "--transaction-log-decoder")
    states = re.findall(r"key: transaction_metadata::transactionalId=dump-txn payload: producerId:\d+,"
                        r"producerEpoch:0,state=(\w+),partitions=\[([\w,-]*)\],"
                        r"txnLastUpdateTimestamp=\d+,txnTimeoutMs=60000$", "\n".join(lines), re.MULTILINE)
    assert states == [("Empty", ""), ("Ongoing", "dumped-txn-0"), ("PrepareCommit", "dumped-txn-0"),
                      ("CompleteCommit", "")], lines
