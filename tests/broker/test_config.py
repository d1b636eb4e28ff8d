"""Broker and topic configuration: Kafka's names, defaults, synonyms and validation."""

import pytest

from protocol import ErrorCode

from broker.config import (
    BrokerConfig, ConfigError, ConfigSource, parse_properties, validate_topic_configs,
)


def test_embedded_defaults_are_a_single_node_on_9092_with_data_in_dot_data():
    config = BrokerConfig()
    assert config.node_id == 1
    assert set(config.roles) == {"broker", "controller"}
    assert [(l.name, l.host, l.port) for l in config.listeners] == [("PLAINTEXT", "", 9092)]
    assert [(l.host, l.port) for l in config.advertised_listeners()] == [("localhost", 9092)]
    assert config.log_dirs == ["./data"]
    assert config["num.partitions"] == 1
    assert config["message.max.bytes"] == 1048588
    assert config["socket.request.max.bytes"] == 104857600
    assert config["offsets.topic.num.partitions"] == 50


def test_port_zero_is_advertised_with_the_bound_port():
    config = BrokerConfig.load(overrides=["listeners=PLAINTEXT://127.0.0.1:0"])
    [advertised] = config.advertised_listeners({"PLAINTEXT": 40123})
    assert (advertised.host, advertised.port) == ("127.0.0.1", 40123)


@pytest.mark.parametrize("override, fragment", [
    ("num.partitions=zero", "num.partitions"),
    ("num.partitions=0", "at least 1"),
    ("auto.create.topics.enable=yes", "true or false"),
    ("listeners=PLAINTEXT:9092", "listeners"),
    ("listeners=FOO://:9092", "security protocol"),
    ("log.cleanup.policy=shred", "compact, delete"),
    ("message.max.bytes=99999999999", "Not a number of type INT"),
    ("process.roles=", "process.roles"),
])
def test_bad_keys_and_values_fail_at_load(override, fragment):
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides=[override])
    assert fragment in str(info.value)


def test_unknown_keys_are_kept_apart_and_valid_ones_still_checked():
    config = BrokerConfig.load(overrides=["metrics.plugin.url=http://x", "num.partitions=2"])
    assert config.unknown_keys == ["metrics.plugin.url"] and config["num.partitions"] == 2
    with pytest.raises(ConfigError):
        BrokerConfig.load(overrides=["metrics.plugin.url=x", "num.partitions=two"])


def test_properties_file_syntax(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\n! also comment\nnum.partitions = 3\n"
                    "log.dirs: /a,\\\n    /b\nauto.create.topics.enable false\n")
    config = BrokerConfig.load(path)
    assert config["num.partitions"] == 3
    assert config.log_dirs == ["/a", "/b"]
    assert config["auto.create.topics.enable"] is False
    assert parse_properties("k=a\\u0041\\tb") == {"k": "aA\tb"}


def test_topic_defaults_follow_broker_synonyms_in_precedence_order():
    config = BrokerConfig.load(overrides=["log.retention.hours=1", "log.retention.minutes=2"])
    assert config.topic_default("retention.ms") == 120_000
    config = BrokerConfig.load(overrides=["log.retention.ms=5"])
    assert config.topic_default("retention.ms") == 5
    assert BrokerConfig().topic_default("retention.ms") == 7 * 24 * 3600 * 1000
    assert BrokerConfig().topic_default("max.message.bytes") == 1048588


def test_describe_topic_reports_sources_and_synonyms():
    # What Apache Kafka 3.9 answers with log.retention.hours=2 and log.roll.ms set in
    # server.properties: a topic config lists its broker synonyms only from its primary broker
    # key (log.retention.ms, log.roll.ms) on, and reports the first listed synonym's source.
    config = BrokerConfig.load(overrides=["log.retention.hours=2", "log.roll.ms=86400000",
                                          "log.flush.scheduler.interval.ms=60000"])
    [entry] = config.describe_topic({"retention.ms": "1000"}, ["retention.ms"])
    assert (entry.value, entry.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert entry.synonyms == [("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)]
    [entry] = config.describe_topic({}, ["retention.ms"])
    assert (entry.value, entry.source, entry.synonyms) == ("7200000", ConfigSource.DEFAULT_CONFIG, [])
    [entry] = config.describe_topic({}, ["segment.ms"])
    assert (entry.value, entry.source) == ("86400000", ConfigSource.STATIC_BROKER_CONFIG)
    assert entry.synonyms == [("log.roll.ms", "86400000", ConfigSource.STATIC_BROKER_CONFIG),
                              ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    [entry] = config.describe_topic({}, ["flush.ms"])
    assert (entry.value, entry.source, entry.synonyms) == ("60000", ConfigSource.DEFAULT_CONFIG, [])
    [entry] = BrokerConfig().describe_topic({}, ["cleanup.policy"])
    assert (entry.value, entry.source) == ("delete", ConfigSource.DEFAULT_CONFIG)
    assert entry.synonyms == [("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG)]


def test_describe_broker_lists_synonyms_from_the_key_itself_on():
    config = BrokerConfig.load(overrides=["log.retention.hours=2", "log.roll.ms=86400000"])
    entries = {e.name: e for e in config.describe()}
    assert entries["log.roll.ms"].synonyms == [
        ("log.roll.ms", "86400000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert entries["log.retention.ms"].synonyms == []
    assert entries["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["log.retention.hours"].synonyms == [
        ("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]


def test_describe_broker_marks_static_and_default_sources():
    config = BrokerConfig.load(overrides=["num.partitions=4"])
    entries = {e.name: e for e in config.describe()}
    assert entries["num.partitions"].value == "4"
    assert entries["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["delete.topic.enable"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["message.max.bytes"].read_only is False
    assert entries["node.id"].read_only is True


def test_topic_config_validation():
    assert validate_topic_configs({"retention.ms": "1000", "cleanup.policy": "compact,delete"}) == {
        "retention.ms": 1000, "cleanup.policy": ["compact", "delete"]}
    with pytest.raises(ConfigError, match="Unknown topic config"):
        validate_topic_configs({"retention.hours": "1"})
    with pytest.raises(ConfigError, match="segment.bytes"):
        validate_topic_configs({"segment.bytes": "10"})
    with pytest.raises(ConfigError, match="message.timestamp.type"):
        validate_topic_configs({"message.timestamp.type": "Whenever"})


def test_dynamic_broker_configs_only_for_dynamic_keys():
    config = BrokerConfig()
    assert config.validate_dynamic({"log.retention.ms": "10"}) == {"log.retention.ms": 10}
    with pytest.raises(ConfigError, match="dynamically"):
        config.validate_dynamic({"node.id": "3"})
    config.set_dynamic({"log.retention.ms": "10"})
    assert config.topic_default("retention.ms") == 10
    assert config.source("log.retention.ms") == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG


def test_thread_pools_change_by_at_most_half_or_double_at_a_time():
    """As Kafka 3.9 (checked side by side with IncrementalAlterConfigs on a broker): INVALID_REQUEST
    with Kafka's message, measured from the current size (num.io.threads 8, background.threads 10)."""
    config = BrokerConfig()
    assert config.validate_dynamic({"num.io.threads": "16"}) == {"num.io.threads": 16}
    assert config.validate_dynamic({"num.io.threads": "4"}) == {"num.io.threads": 4}
    with pytest.raises(ConfigError) as refused:
        config.validate_dynamic({"num.io.threads": "3"})
    assert str(refused.value) == (
        "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update "
        "validation failed for num.io.threads=3, value should be at least half the current value 8 for "
        "configuration Invalid dynamic configuration")
    assert refused.value.error_code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ConfigError, match="background.threads=25, value should not be greater than double "
                                          "the current value 10"):
        config.validate_dynamic({"background.threads": "25"})
    config.set_dynamic({}, {"num.io.threads": "16"})    # measured from the size in force
    assert config.validate_dynamic({"num.io.threads": "32"}) == {"num.io.threads": 32}


def test_user_settings_replace_the_embedded_ones_they_supersede():
    assert BrokerConfig.load(overrides=["log.dir=/srv/kafka"]).log_dirs == ["/srv/kafka"]
    assert BrokerConfig.load(overrides=["broker.id=4"]).node_id == 4
    assert BrokerConfig.load(overrides=["log.dirs=/a,/b", "log.dir=/c"]).log_dirs == ["/a", "/b"]


KAFKA_4_STYLE_PROPERTIES = """
# the settings of Kafka 4's shipped single-node server.properties
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_kafkas_own_single_node_properties_load(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(KAFKA_4_STYLE_PROPERTIES)
    config = BrokerConfig.load(path)
    assert [l.name for l in config.client_listeners] == ["PLAINTEXT"]
    assert [(l.host, l.port) for l in config.advertised_listeners()] == [("localhost", 9092)]
    assert config.log_dirs == ["/tmp/kraft-combined-logs"]


@pytest.mark.parametrize("given,other", [("node.id", "broker.id"), ("broker.id", "node.id")])
def test_node_id_and_broker_id_stand_for_each_other(given, other):
    config = BrokerConfig.load(overrides=[f"{given}=3"])
    entries = {e.name: e for e in config.describe([given, other])}
    assert config.node_id == 3
    assert entries[other].value == "3"
    assert entries[other].source == ConfigSource.STATIC_BROKER_CONFIG
