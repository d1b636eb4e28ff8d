"""Odradek's broker config catalog against Kafka 4.3's list of broker configs (kafka_4_3_broker_configs.tsv,
from Kafka's documentation): every name Kafka 4.3 knows is known here with its type, default, sensitivity
and update mode, and every name known here is accounted for, so drift either way fails a test. Where
Odradek deliberately differs, the allow-lists below say why.

Then the same names through the real paths: server.properties, DescribeConfigs from confluent-kafka's
AdminClient and the Java Admin (kafka-clients 4.x), and dynamic updates refused or accepted as Kafka 4.3
would (read-only keys refused, cluster-wide ones accepted at the cluster default, per-broker ones only
per broker)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from broker.config import BROKER_CONFIGS, BrokerConfig, ConfigError, ConfigType, render
from broker.config.kafka_catalog import LISTENER_PREFIX_ONLY, PER_BROKER_ONLY
from protocol import ErrorCode

REFERENCE = Path(__file__).with_name("kafka_4_3_broker_configs.tsv")
REPO = Path(__file__).resolve().parents[2]


def _reference() -> dict[str, tuple[str, str | None, str, str]]:
    rows = {}
    for line in REFERENCE.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, ctype, default, importance, mode = line.split("\t")
        value = {"<none>": None, "null": None, '""': ""}.get(default, default)
        rows[name] = (ctype.upper(), value, importance, mode)
    return rows


KAFKA_4 = _reference()

# Odradek acts on these and keeps its own type or default (the wire value is what its behaviour uses).
TYPE_DIFFERS = {
    # Kafka 4.x describes these as LIST; Odradek parses them as the comma-separated STRING Kafka 3.9
    # describes (same value on the wire, config_type STRING as the 3.9 reference broker answers).
    "listeners": "LIST in 4.x, STRING here and in 3.9",
    "advertised.listeners": "LIST in 4.x, STRING here and in 3.9",
    "controller.listener.names": "LIST in 4.x, STRING here and in 3.9",
    "early.start.listeners": "LIST in 4.x, STRING here and in 3.9",
    "log.dir": "LIST in 4.x, STRING here and in 3.9",
    "log.dirs": "LIST in 4.x, STRING here and in 3.9",
}
DEFAULT_DIFFERS = {
    "node.id": "required in Kafka; -1 here is the 'not set' sentinel (start-up refuses it, as Kafka)",
    "process.roles": "required in Kafka; empty here is 'not set' (start-up refuses it, as Kafka)",
    "group.coordinator.rebalance.protocols": "Kafka 4.3 adds 'streams'; Odradek has no streams groups",
    "metric.reporters": "Kafka 4 adds JmxReporter; Odradek has no JMX (its metrics are on /metrics)",
}
# Per broker in Kafka, read-only here: Odradek does not rebind listeners at runtime.
MODE_DIFFERS = {"listeners", "listener.security.protocol.map"}

# Known here, not in Kafka 4.3's list, each for a reason:
# Kafka 3.9 describes them (the 3.9 reference test wants them known); 4.0 dropped them. Odradek's
# controller still honours leader.imbalance.per.broker.percentage.
KAFKA_3_ONLY = {
    "auto.include.jmx.reporter", "controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms",
    "eligible.leader.replicas.enable", "leader.imbalance.per.broker.percentage",
}
# Kafka 4.0's documented list (kafka.apache.org/40) holds no name 4.3's lacks but this one (later
# replaced by group.share.max.share.sessions): known too.
KAFKA_4_0_ONLY = {"group.share.max.groups"}
KAFKA_UNDOCUMENTED = {   # Kafka defines them (internal keys, or the authorizer's), its docs do not list them
    "producer.id.expiration.check.interval.ms", "unstable.api.versions.enable",
    "unstable.feature.versions.enable", "super.users", "allow.everyone.if.no.acl.found",
}
# Kafka's internal switch for share groups before the share.version feature (defined in 3.9's and 4.0's
# ShareGroupConfig, never documented); the share-group work may define it.
KAFKA_INTERNAL_OPTIONAL = {"group.share.enable"}
# Odradek's own (log.flush.recovery.point.checkpoint.interval.ms is in no Kafka's jars: an early
# Odradek name, unused, kept so existing server.properties still load).
ODRADEK_ONLY = {"metrics.port", "log.flush.before.acknowledge", "ssl.handshake.timeout.ms",
                "log.flush.recovery.point.checkpoint.interval.ms"}


def test_the_reference_list_is_kafka_4_3s():
    assert len(KAFKA_4) == 343
    assert {"share.coordinator.threads", "group.streams.session.timeout.ms", "cordoned.log.dirs",
            "remote.log.manager.follower.thread.pool.size"} <= set(KAFKA_4)


def test_every_kafka_4_broker_config_is_known():
    assert sorted(set(KAFKA_4) - set(BROKER_CONFIGS)) == []


def test_every_known_broker_config_is_accounted_for():
    unexplained = (set(BROKER_CONFIGS) - set(KAFKA_4) - KAFKA_3_ONLY - KAFKA_4_0_ONLY - KAFKA_UNDOCUMENTED
                   - KAFKA_INTERNAL_OPTIONAL - ODRADEK_ONLY)
    assert sorted(unexplained) == []
    assert (KAFKA_3_ONLY | KAFKA_4_0_ONLY | KAFKA_UNDOCUMENTED | ODRADEK_ONLY) <= set(BROKER_CONFIGS)


@pytest.mark.parametrize("name", sorted(KAFKA_4))
def test_type_default_sensitivity_and_update_mode_match_kafka_4(name):
    ctype, default, _importance, mode = KAFKA_4[name]
    ours = BROKER_CONFIGS[name]
    if name not in TYPE_DIFFERS:
        assert ours.type.name == ctype
    assert ours.sensitive == (ctype == "PASSWORD")
    if name not in DEFAULT_DIFFERS and ctype != "PASSWORD":
        assert render(ours.default) == default
    if name in MODE_DIFFERS:
        assert not ours.dynamic
    elif mode == "read-only":
        assert not ours.dynamic
    else:
        assert ours.dynamic
        assert (name in PER_BROKER_ONLY or name in LISTENER_PREFIX_ONLY) == (mode == "per-broker")


def test_the_allow_lists_are_still_needed():
    # A difference fixed later must leave the allow-list too.
    for name in TYPE_DIFFERS:
        assert BROKER_CONFIGS[name].type.name != KAFKA_4[name][0], name
    for name in DEFAULT_DIFFERS:
        assert render(BROKER_CONFIGS[name].default) != KAFKA_4[name][1], name
    for name in MODE_DIFFERS:
        assert KAFKA_4[name][3] != "read-only", name


# Every 4.3 name but the two start-up refuses to leave unset.
KAFKA_4_NAMES = sorted(n for n in KAFKA_4 if n in BROKER_CONFIGS and n not in ("node.id", "process.roles"))


def test_server_properties_accept_every_kafka_4_name_at_its_default():
    settings = {name: KAFKA_4[name][1] for name in KAFKA_4_NAMES
                if KAFKA_4[name][1] is not None and name not in TYPE_DIFFERS
                and name not in DEFAULT_DIFFERS and KAFKA_4[name][0] != "PASSWORD"
                and name != "broker.id"}     # broker.id -1 would stand in for node.id
    settings["share.coordinator.threads"] = "3"
    settings["sasl.oauthbearer.assertion.private.key.passphrase"] = "secret"
    config = BrokerConfig(settings)
    assert config["share.coordinator.threads"] == 3
    entries = {e.name: e for e in config.describe(["share.coordinator.threads", "group.streams.max.size",
                                                   "sasl.oauthbearer.assertion.private.key.passphrase"])}
    assert entries["share.coordinator.threads"].value == "3"
    assert entries["group.streams.max.size"].value == "2147483647"
    assert entries["sasl.oauthbearer.assertion.private.key.passphrase"].value is None
    assert entries["sasl.oauthbearer.assertion.private.key.passphrase"].sensitive


@pytest.mark.parametrize("name,text", [
    ("group.share.max.delivery.count.limit", "30"),      # [5,...,25]
    ("sasl.oauthbearer.assertion.claim.exp.seconds", "-1"),
    ("group.consumer.migration.policy", "sideways"),
    ("group.streams.num.standby.replicas", "abc"),
])
def test_kafka_4_values_are_validated_as_kafka_validates_them(name, text):
    with pytest.raises(ConfigError):
        BrokerConfig({name: text})


def test_dynamic_updates_of_kafka_4_names_follow_their_update_mode():
    config = BrokerConfig({})
    for name in KAFKA_4_NAMES:
        if name in MODE_DIFFERS:
            continue
        _, default, _, mode = KAFKA_4[name]
        value = default if default is not None else ("x" if BROKER_CONFIGS[name].type in (
            ConfigType.STRING, ConfigType.PASSWORD, ConfigType.CLASS, ConfigType.LIST) else "1")
        if mode == "read-only":
            for resource in ("", "1"):
                with pytest.raises(ConfigError, match="Cannot update these configs dynamically") as refused:
                    config.validate_dynamic({name: value}, resource)
                assert refused.value.error_code == ErrorCode.INVALID_REQUEST
        elif mode == "cluster-wide":
            assert name in config.validate_dynamic({name: value}, "")
        elif name in LISTENER_PREFIX_ONLY:
            with pytest.raises(ConfigError, match="only per-listener"):
                config.validate_dynamic({name: value}, "1")
        else:
            with pytest.raises(ConfigError, match="default cluster level"):
                config.validate_dynamic({name: value}, "")
            assert name in config.validate_dynamic({name: value}, "1")


# ------------------------------------------------------------------ real clients over a real socket

NEW_IN_4 = ["share.coordinator.threads", "group.streams.session.timeout.ms", "cordoned.log.dirs",
            "remote.log.manager.follower.thread.pool.size", "group.coordinator.background.threads",
            "sasl.oauthbearer.client.credentials.client.secret", "transaction.two.phase.commit.enable"]


def _expected(name: str) -> tuple[str | None, bool, bool]:
    """(value, sensitive, read-only) as Kafka 4.3 would describe a broker left at its defaults."""
    ctype, default, _, mode = KAFKA_4[name]
    return (None if ctype == "PASSWORD" else default), ctype == "PASSWORD", mode == "read-only"


def test_confluent_admin_describes_and_alters_kafka_4_names(shared_broker):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ConfigSource)

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    node = str(shared_broker.broker.node_id)
    resource = ConfigResource(ConfigResource.Type.BROKER, node)
    described = admin.describe_configs([resource])[resource].result(60)
    assert set(KAFKA_4) <= set(described)
    for name in NEW_IN_4:
        value, sensitive, read_only = _expected(name)
        entry = described[name]
        assert (entry.value or None, entry.is_sensitive, entry.is_read_only) == (value or None, sensitive,
                                                                                 read_only), name
        assert entry.source == ConfigSource.DEFAULT_CONFIG.value, name

    # cluster-wide: may be set per broker too (librdkafka cannot name the cluster default, resource "")
    per_broker = ConfigResource(ConfigResource.Type.BROKER, node, incremental_configs=[ConfigEntry(
        "group.streams.assignment.interval.ms", "2500", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([per_broker])[per_broker].result(60)
    deadline = time.monotonic() + 60     # the broker applies it once the controller has committed it
    while True:
        entry = admin.describe_configs([resource])[resource].result(60)["group.streams.assignment.interval.ms"]
        if entry.value == "2500" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert (entry.value, entry.source) == ("2500", ConfigSource.DYNAMIC_BROKER_CONFIG.value)

    # read-only: refused as Kafka refuses it, not as an unknown name
    readonly = ConfigResource(ConfigResource.Type.BROKER, node, incremental_configs=[ConfigEntry(
        "share.coordinator.threads", "2", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(ck.KafkaException) as refused:
        admin.incremental_alter_configs([readonly])[readonly].result(60)
    error = refused.value.args[0]
    assert error.code() == ck.KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically" in error.str()


_JAVA_DESCRIBE = """
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;

public class DescribeBroker {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, args[1]);
            Config config = admin.describeConfigs(List.of(broker)).all().get(60, TimeUnit.SECONDS).get(broker);
            for (ConfigEntry e : config.entries())
                System.out.println(e.name() + "\\t" + e.value() + "\\t" + e.source() + "\\t" + e.isSensitive()
                                   + "\\t" + e.isReadOnly() + "\\t" + e.type());
            // the cluster-wide default (resource ""): a cluster-wide 4.x key, then a read-only one
            ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
            for (String[] kv : new String[][] {{"group.consumer.assignment.interval.ms", "3000"},
                                               {"group.streams.session.timeout.ms", "50000"}}) {
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET);
                try {
                    admin.incrementalAlterConfigs(Map.of(cluster, List.of(op))).all().get(60, TimeUnit.SECONDS);
                    System.out.println("ALTER\\t" + kv[0] + "\\tOK");
                } catch (java.util.concurrent.ExecutionException e) {
                    System.out.println("ALTER\\t" + kv[0] + "\\t" + e.getCause().getClass().getSimpleName()
                                       + ": " + e.getCause().getMessage());
                }
            }
        }
    }
}
"""


def test_java_admin_describes_kafka_4_names(shared_broker, tmp_path):
    jars = sorted(glob.glob(str(REPO / "compat-tests" / ".cache" / "java4" / "*.jar")))
    if not any("kafka-clients-4." in os.path.basename(j) for j in jars) or not shutil.which("javac"):
        pytest.skip("needs javac and kafka-clients 4.x (bash compat-tests/setup.sh)")
    classpath = os.pathsep.join(jars)
    (tmp_path / "DescribeBroker.java").write_text(_JAVA_DESCRIBE)
    subprocess.run(["javac", "-cp", classpath, "DescribeBroker.java"], cwd=tmp_path, check=True, timeout=300)
    out = subprocess.run(["java", "-cp", classpath + os.pathsep + ".", "DescribeBroker", shared_broker.bootstrap,
                          str(shared_broker.broker.node_id)], cwd=tmp_path, check=True, timeout=300,
                         capture_output=True, text=True).stdout
    described = {fields[0]: fields[1:] for fields in (line.split("\t") for line in out.splitlines())
                 if len(fields) == 6}
    assert set(KAFKA_4) <= set(described)
    for name in NEW_IN_4:
        value, sensitive, read_only = _expected(name)
        java_value, source, java_sensitive, java_read_only, java_type = described[name]
        assert (None if java_value == "null" else java_value) == value, name
        assert (java_sensitive, java_read_only) == (str(sensitive).lower(), str(read_only).lower()), name
        assert java_type == KAFKA_4[name][0], name
    assert described["share.coordinator.threads"][1] == "DEFAULT_CONFIG"
    altered = {fields[1]: fields[2] for fields in (line.split("\t") for line in out.splitlines())
               if fields[0] == "ALTER"}
    assert altered["group.consumer.assignment.interval.ms"] == "OK"
    assert altered["group.streams.session.timeout.ms"].startswith(
        "InvalidRequestException: Cannot update these configs dynamically")
