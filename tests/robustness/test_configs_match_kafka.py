"""Configs as the reference Apache Kafka 3.9 knows them: every broker and topic config it describes
is known to Odradek with the same type and sensitivity, and dynamic updates are refused (or
accepted) with Kafka's codes and messages. The refusal cases run against both brokers."""

from __future__ import annotations

import os
import time

import pytest

from protocol import ErrorCode, messages

from tests import apache_kafka as oracle
from tests.broker.raw_client import RawClient

apache_kafka = oracle.apache_kafka   # the session fixture

BROKER, TOPIC = 4, 2
D = messages.DescribeConfigsRequest
I = messages.IncrementalAlterConfigsRequest
A = messages.AlterConfigsRequest

# Kafka 3.9 still describes these; Kafka 4.0 removed them, and so does Odradek (a 4.x broker).
REMOVED_IN_4 = {"broker.id.generation.enable", "reserved.broker.max.id", "control.plane.listener.name",
                "inter.broker.protocol.version", "log.message.format.version",
                "log.message.downconversion.enable", "log.message.timestamp.difference.max.ms",
                "offsets.commit.required.acks", "delegation.token.master.key",
                "message.downconversion.enable", "message.format.version",
                "message.timestamp.difference.max.ms"}
# Dynamic per broker in Kafka, static here: Odradek does not rebind listeners at runtime.
STATIC_HERE = {"listeners", "advertised.listeners", "listener.security.protocol.map"}
# Kafka 4.x changed their type or update mode; Odradek follows 4.x (test_kafka4_config_catalog.py).
CHANGED_IN_4 = {"group.share.max.size", "remote.log.manager.copier.thread.pool.size",
                "remote.log.manager.expiration.thread.pool.size", "remote.log.reader.threads"}


def _described_configs(port, resource_type, name, keys=None, synonyms=False) -> list:
    with RawClient("127.0.0.1", port, timeout=30) as client:
        answer = client.request(32, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=keys)],
            include_synonyms=synonyms, include_documentation=False))
    result = answer.results[0]
    assert result.error_code == 0
    return result.configs


def _describe(port, resource_type, name):
    return {c.name: c for c in _described_configs(port, resource_type, name)}


def _known(name: str) -> bool:
    return not name.startswith("zookeeper.") and not name.startswith("password.encoder.") \
        and name not in REMOVED_IN_4


def test_every_broker_config_kafka_describes_is_known(apache_kafka, shared_broker):
    theirs = _describe(apache_kafka.port, BROKER, "1")
    ours = _describe(shared_broker.port, BROKER, str(shared_broker.broker.node_id))
    expected = {name for name in theirs if _known(name)}
    assert expected - set(ours) == set()
    for name in expected - CHANGED_IN_4:
        kafka, odradek = theirs[name], ours[name]
        assert (odradek.config_type, odradek.is_sensitive) == (kafka.config_type, kafka.is_sensitive), name
        if name not in STATIC_HERE:
            assert odradek.read_only == kafka.read_only, name
        if kafka.is_sensitive:
            assert odradek.value is None, name
        if kafka.config_type == 6:      # DOUBLE: rendered as Java renders it ("1.7976931348623157E308")
            assert odradek.value == kafka.value, name


def test_every_topic_config_kafka_describes_is_known(apache_kafka, shared_broker):
    with RawClient("127.0.0.1", apache_kafka.port) as kafka, \
            RawClient("127.0.0.1", shared_broker.port) as odradek:
        for client in (kafka, odradek):
            assert client.create_topic("described", 1).error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
    theirs = _describe(apache_kafka.port, TOPIC, "described")
    ours = _describe(shared_broker.port, TOPIC, "described")
    assert {n for n in theirs if _known(n)} == set(ours)
    for name, entry in ours.items():
        assert entry.config_type == theirs[name].config_type, name


@pytest.fixture(params=["odradek", "kafka"])
def target(request, shared_broker):
    if request.param == "kafka":
        return request.getfixturevalue("apache_kafka").port, "1"
    return shared_broker.port, str(shared_broker.broker.node_id)


# (resource: "" cluster default or "broker" = this broker's id, key, value, Kafka's code, message start)
ALTER_CASES = [
    ("broker", "log.dirs", "/x", ErrorCode.INVALID_REQUEST,
     "Cannot update these configs dynamically: Set(log.dirs)"),
    ("", "log.dirs", "/x", ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically"),
    ("", "sasl.enabled.mechanisms", "PLAIN", ErrorCode.INVALID_REQUEST,
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(sasl.enabled.mechanisms)"),
    ("broker", "sasl.enabled.mechanisms", "PLAIN", ErrorCode.NONE, None),
    ("broker", "sasl.jaas.config", "x required;", ErrorCode.NONE, None),
    ("broker", "ssl.keystore.location", "/x", ErrorCode.INVALID_REQUEST,
     "These security configs can be dynamically updated only per-listener using the listener "
     "prefix: HashSet(ssl.keystore.location)"),
    ("broker", "listener.name.plaintext.sasl.enabled.mechanisms", "PLAIN", ErrorCode.NONE, None),
    ("", "max.connections.per.ip.overrides", "127.0.0.1:5", ErrorCode.NONE, None),
    ("", "log.cleaner.threads", "abc", ErrorCode.INVALID_REQUEST,
     "Invalid value abc for configuration log.cleaner.threads: Not a number of type INT"),
    ("", "num.io.threads", "4", ErrorCode.NONE, None),
    ("broker", "background.threads", "5", ErrorCode.NONE, None),
    ("", "no.such.config", "1", ErrorCode.NONE, None),      # Kafka accepts names it does not know
    ("", "listener.name.plaintext.max.connections", "5", ErrorCode.NONE, None),
    ("broker", "listener.name.plaintext.max.connections", "abc", ErrorCode.INVALID_REQUEST, None),
]


@pytest.mark.parametrize("resource,key,value,code,message", ALTER_CASES,
                         ids=[f"{c[0] or 'cluster'}-{c[1]}" for c in ALTER_CASES])
def test_dynamic_broker_config_answers_match_kafka(target, resource, key, value, code, message):
    port, broker_id = target
    name = broker_id if resource == "broker" else ""
    with RawClient("127.0.0.1", port, timeout=30) as client:
        incremental = client.request(44, 1, I(resources=[I.AlterConfigsResource(
            resource_type=BROKER, resource_name=name,
            configs=[I.AlterableConfig(name=key, config_operation=0, value=value)])],
            validate_only=True)).responses[0]
        legacy = client.request(33, 2, A(resources=[A.AlterConfigsResource(
            resource_type=BROKER, resource_name=name, configs=[A.AlterableConfig(name=key, value=value)])],
            validate_only=True)).responses[0]
    for answer in (incremental, legacy):
        assert answer.error_code == code
        if message:
            assert answer.error_message.startswith(message)


def _alter_broker(port, name, key, value):
    """IncrementalAlterConfigs: SET `key` on broker resource `name`, or DELETE it when value is None."""
    operation = 1 if value is None else 0
    with RawClient("127.0.0.1", port, timeout=30) as client:
        answer = client.request(44, 1, I(resources=[I.AlterConfigsResource(
            resource_type=BROKER, resource_name=name,
            configs=[I.AlterableConfig(name=key, config_operation=operation, value=value)])],
            validate_only=False)).responses[0]
    assert answer.error_code == 0, answer.error_message


def _eventually_equal(read, expected, timeout=10.0):
    """read() once it equals expected, or its last answer (Kafka applies alterations a moment later)."""
    deadline = time.monotonic() + timeout
    while (answer := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return answer


def test_custom_dynamic_broker_configs_are_described_as_kafka_describes_them(target):
    """A key Kafka does not know (a plugin's, say) is kept and described, hidden as sensitive:
    kafka-configs --describe lists it, and its legacy --alter insists it be given again."""
    port, broker_id = target
    keys = ["custom.plugin.everywhere", "custom.plugin.default.only"]

    def described(name, wanted=None):
        return {c.name: (c.value, c.read_only, c.config_source, c.is_sensitive, c.config_type,
                         [(s.name, s.value, s.source) for s in c.synonyms])
                for c in _described_configs(port, BROKER, name, wanted, synonyms=True)
                if c.name in keys}

    def both(wanted=None):
        return described(broker_id, wanted), described("", wanted)

    own, default = 2, 3    # DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG
    expected = (
        {keys[0]: (None, True, own, True, 0, [(keys[0], None, own), (keys[0], None, default)]),
         keys[1]: (None, True, default, True, 0, [(keys[1], None, default)])},
        {key: (None, True, default, True, 0, [(key, None, default)]) for key in keys})
    _alter_broker(port, "", keys[0], "1")
    _alter_broker(port, "", keys[1], "2")
    _alter_broker(port, broker_id, keys[0], "3")
    try:
        assert _eventually_equal(both, expected) == expected
        assert both(keys) == expected
    finally:
        _alter_broker(port, broker_id, keys[0], None)
        for key in keys:
            _alter_broker(port, "", key, None)
    assert _eventually_equal(both, ({}, {})) == ({}, {})


def test_broker_id_is_described_as_the_node_id_it_stands_for(target):
    """Only node.id is set: Kafka gives broker.id the same value, a static setting too."""
    port, broker_id = target
    described = {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
                 for c in _described_configs(port, BROKER, broker_id, ["broker.id", "node.id"],
                                             synonyms=True)}
    static, default = 4, 5    # STATIC_BROKER_CONFIG, DEFAULT_CONFIG
    assert described == {name: (broker_id, static, [(name, broker_id, static), (name, "-1", default)])
                         for name in ("broker.id", "node.id")}


def _find_coordinator(port, key_type: int) -> None:
    """FindCoordinator until it answers (the first call creates the internal topic)."""
    F = messages.FindCoordinatorRequest
    deadline = time.monotonic() + 30
    with RawClient("127.0.0.1", port, timeout=30) as client:
        while True:
            found = client.request(10, 4, F(key_type=key_type, coordinator_keys=["cfg"])).coordinators[0]
            if found.error_code == 0 or time.monotonic() > deadline:
                assert found.error_code == 0, found
                return
            time.sleep(0.2)


def test_internal_topics_are_created_with_kafkas_topic_configs(target):
    port, _ = target
    for key_type in (0, 1):
        _find_coordinator(port, key_type)
    overrides = {topic: {c.name: c.value for c in _described_configs(port, TOPIC, topic)
                         if c.config_source == 1}     # DYNAMIC_TOPIC_CONFIG
                 for topic in ("__consumer_offsets", "__transaction_state")}
    compacted = {"cleanup.policy": "compact", "segment.bytes": "104857600"}
    assert overrides == {
        "__consumer_offsets": {**compacted, "compression.type": "producer"},
        # never an unclean leader for transaction state, whatever the broker default says
        "__transaction_state": {**compacted, "compression.type": "uncompressed",
                                "min.insync.replicas": "1", "unclean.leader.election.enable": "false"}}


# Topic configs Kafka 4.x knows that Kafka's client library does not name (its LogConfig defines them).
NOT_IN_TOPIC_CONFIG = {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}
_LIST_NAMES = """
public class ListTopicConfigs {
    public static void main(String[] args) throws Exception {
        for (java.lang.reflect.Field f : org.apache.kafka.common.config.TopicConfig.class.getFields())
            if (f.getType() == String.class && f.getName().endsWith("_CONFIG")) System.out.println(f.get(null));
    }
}
"""


def test_every_topic_config_kafka_4_names_is_known(tmp_path):
    # The 4.x client library's TopicConfig (compat-tests' Java jars) against Odradek's topic catalog;
    # Kafka 4 still names message.downconversion.enable there, but its brokers no longer define it.
    import glob
    import shutil
    import subprocess

    from broker.config.topic_catalog import TOPIC_CONFIGS

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    jars = sorted(glob.glob(os.path.join(root, "compat-tests", ".cache", "java4", "kafka-clients-4.*.jar")))
    if not jars or not shutil.which("javac"):
        pytest.skip("needs javac and kafka-clients 4.x (bash compat-tests/setup.sh)")
    (tmp_path / "ListTopicConfigs.java").write_text(_LIST_NAMES)
    subprocess.run(["javac", "-cp", jars[-1], "ListTopicConfigs.java"], cwd=tmp_path, check=True, timeout=120)
    listed = subprocess.run(["java", "-cp", f"{jars[-1]}{os.pathsep}.", "ListTopicConfigs"], cwd=tmp_path,
                            check=True, timeout=120, capture_output=True, text=True).stdout.split()
    assert len(listed) > 25
    assert set(listed) - {"message.downconversion.enable"} == set(TOPIC_CONFIGS) - NOT_IN_TOPIC_CONFIG


# Topic configs that fall back to several broker keys (log.retention.ms/minutes/hours, ...): Kafka
# lists broker synonyms only from the primary key on, so with none of them set retention.ms shows
# no log.retention.hours, and the source is the first listed synonym's. Found with
# @platformatic/kafka's describeConfigs(includeSynonyms).
SYNONYM_GROUP_TOPIC_CONFIGS = ["retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms",
                               "retention.bytes", "cleanup.policy", "max.message.bytes"]
SYNONYM_GROUP_BROKER_CONFIGS = ["log.retention.ms", "log.retention.minutes", "log.retention.hours",
                                "log.roll.ms", "log.roll.hours", "log.roll.jitter.ms",
                                "log.roll.jitter.hours", "log.flush.interval.ms",
                                "log.flush.scheduler.interval.ms"]


def _described_synonyms(port, resource_type, name, keys):
    return {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
            for c in _described_configs(port, resource_type, name, keys, synonyms=True)}


def test_config_synonyms_and_sources_match_kafka(apache_kafka, shared_broker):
    overrides = {"retention.ms": "5000000", "segment.ms": "7000000"}
    for port in (apache_kafka.port, shared_broker.port):
        with RawClient("127.0.0.1", port) as client:
            for topic, configs in (("synonyms-default", {}), ("synonyms-set", overrides)):
                assert client.create_topic(topic, 1, configs).error_code in (
                    0, ErrorCode.TOPIC_ALREADY_EXISTS)
    for topic in ("synonyms-default", "synonyms-set"):
        theirs = _described_synonyms(apache_kafka.port, TOPIC, topic, SYNONYM_GROUP_TOPIC_CONFIGS)
        ours = _described_synonyms(shared_broker.port, TOPIC, topic, SYNONYM_GROUP_TOPIC_CONFIGS)
        assert ours == theirs
    theirs = _described_synonyms(apache_kafka.port, BROKER, "1", SYNONYM_GROUP_BROKER_CONFIGS)
    ours = _described_synonyms(shared_broker.port, BROKER, str(shared_broker.broker.node_id),
                               SYNONYM_GROUP_BROKER_CONFIGS)
    assert ours == theirs
