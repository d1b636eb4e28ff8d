"""Real clients against ACLs over SASL/PLAIN: confluent-kafka (librdkafka) and the Java client
get Kafka's authorization errors as their usual exceptions, and succeed once granted.

The ACLs are managed with confluent-kafka's AdminClient (CreateAcls / DescribeAcls / DeleteAcls)
as the super user; alice is an ordinary user.
"""

from __future__ import annotations

import os
import sys
import uuid

import confluent_kafka
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient, NewTopic,
    ResourcePatternType, ResourceType,
)

from broker.security.authorizer import STANDARD_AUTHORIZER
from broker.testing import running_broker

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin",
        "offsets.topic.num.partitions": "1",
    }
    with running_broker(tmp_path_factory.mktemp("acl-clients"), config) as running:
        yield running


def settings(broker, user, **extra):
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user],
            **extra}


def admin_client(broker, user="admin"):
    return AdminClient(settings(broker, user))


def new_topic(admin, name):
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(timeout=30)


def allow(admin, rtype, name, operation, principal="User:alice"):
    binding = AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", operation,
                         AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(timeout=30)
    return binding


def produce(broker, topic, value):
    outcome = {}
    producer = confluent_kafka.Producer(settings(broker, "alice", **{"message.timeout.ms": 10000}))
    producer.produce(topic, value, on_delivery=lambda err, msg: outcome.setdefault("error", err))
    producer.flush(20)
    return outcome.get("error", "no delivery report")


def consume_one(broker, topic, group, timeout=20.0):
    """The first record, or the first error the consumer reports."""
    consumer = confluent_kafka.Consumer(settings(broker, "alice", **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        for _ in range(int(timeout / 0.5)):
            message = consumer.poll(0.5)
            if message is None:
                continue
            return message.error() or message.value()
        return None
    finally:
        consumer.close()


def test_confluent_kafka_sees_authorization_errors_then_succeeds_once_granted(sasl_broker):
    admin = admin_client(sasl_broker)
    topic, group = f"orders-{uuid.uuid4().hex[:6]}", f"billing-{uuid.uuid4().hex[:6]}"
    new_topic(admin, topic)

    error = produce(sasl_broker, topic, b"first")
    assert isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    allow(admin, ResourceType.TOPIC, topic, AclOperation.WRITE)
    assert produce(sasl_broker, topic, b"granted") is None

    error = consume_one(sasl_broker, topic, group)
    assert isinstance(error, KafkaError) and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    allow(admin, ResourceType.GROUP, group, AclOperation.READ)
    error = consume_one(sasl_broker, topic, group)
    assert isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(admin, ResourceType.TOPIC, topic, AclOperation.READ)
    assert consume_one(sasl_broker, topic, group) == b"granted"

    # DescribeAcls / DeleteAcls through the AdminClient.
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                  None, AclOperation.ANY, AclPermissionType.ANY)
    described = admin.describe_acls(everything).result(timeout=30)
    assert {(b.restype, b.name, b.operation) for b in described} >= {
        (ResourceType.TOPIC, topic, AclOperation.WRITE), (ResourceType.TOPIC, topic, AclOperation.READ),
        (ResourceType.GROUP, group, AclOperation.READ)}
    topic_only = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None,
                                  None, AclOperation.ANY, AclPermissionType.ANY)
    [deleted] = admin.delete_acls([topic_only]).values()
    assert {b.operation for b in deleted.result(timeout=30)} == {AclOperation.WRITE, AclOperation.READ}
    error = produce(sasl_broker, topic, b"revoked")
    assert isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acl_admin_needs_cluster_alter(sasl_broker):
    alice = admin_client(sasl_broker, "alice")
    binding = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    [future] = alice.create_acls([binding]).values()
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        future.result(timeout=30)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # ... and alice's metadata does not list the topics she may not describe.
    new_topic(admin_client(sasl_broker), "alice-cannot-see")
    topics = alice.list_topics(timeout=20).topics
    assert "alice-cannot-see" not in topics


def _java_client(sasl_broker, tmp_path):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "compat-tests"))
    from odradek_compat.clients.java import JavaClient, jars_missing
    missing = jars_missing("java-4")
    if missing:
        pytest.skip(missing)
    properties = tmp_path / "alice.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="alice-secret";\n')
    return JavaClient(sasl_broker.bootstrap, "java-4", str(properties))


def test_java_client_gets_authorization_exceptions(sasl_broker, tmp_path):
    client = _java_client(sasl_broker, tmp_path)
    from odradek_compat.records import Rec   # importable once _java_client set the path
    admin = admin_client(sasl_broker)
    topic, group = f"java-{uuid.uuid4().hex[:6]}", f"jgroup-{uuid.uuid4().hex[:6]}"
    new_topic(admin, topic)
    try:
        [delivery] = client.produce(topic, [Rec(key=b"k", value=b"v")], idempotent=False,
                                    timeout=30)
        assert delivery.error and "TopicAuthorizationException" in delivery.error
        allow(admin, ResourceType.TOPIC, topic, AclOperation.WRITE)
        [delivery] = client.produce(topic, [Rec(key=b"k", value=b"v")], timeout=30)
        assert delivery.error is None and delivery.offset == 0
        allow(admin, ResourceType.TOPIC, topic, AclOperation.READ)
        member = client.group_open(group, topic)
        with pytest.raises(Exception) as raised:
            for _ in range(20):
                client.group_poll(member, timeout_ms=500)
        assert "GroupAuthorizationException" in str(raised.value)
        transactional_id = f"jtxn-{uuid.uuid4().hex[:6]}"
        with pytest.raises(Exception) as raised:
            client.txn_produce(topic, transactional_id, [([Rec(key=None, value=b"t")], True)])
        assert "TransactionalIdAuthorizationException" in str(raised.value)
        allow(admin, ResourceType.TRANSACTIONAL_ID, transactional_id, AclOperation.WRITE)
        client.txn_produce(topic, transactional_id, [([Rec(key=None, value=b"t")], True)])
        assert [m.value for m in client.consume(topic, timeout=10)] == [b"v", b"t"]
    finally:
        client.close()


def test_odradek_acls_command(sasl_broker, tmp_path, capsys):
    import json

    from broker.admin import main
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.username=admin\nsasl.password=admin-secret\n")
    common = ["-b", sasl_broker.bootstrap, "--command-config", str(config)]
    prefix = f"cli-{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}.orders"
    new_topic(admin_client(sasl_broker), topic)
    assert isinstance(produce(sasl_broker, topic, b"x"), KafkaError)

    assert main(["acls", "create", *common, "--allow-principal", "User:alice", "--operation", "Write",
                 "--operation", "describe", "--topic", prefix + ".",
                 "--resource-pattern-type", "prefixed"]) == 0
    assert produce(sasl_broker, topic, b"x") is None
    capsys.readouterr()

    assert main(["acls", "list", *common, "--topic", topic, "--resource-pattern-type", "match",
                 "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted((r["operation"], r["pattern_type"], r["resource_name"]) for r in listed) == [
        ("DESCRIBE", "PREFIXED", prefix + "."), ("WRITE", "PREFIXED", prefix + ".")]
    assert main(["acls", "list", *common, "--principal", "User:alice"]) == 0
    table = capsys.readouterr().out
    assert "PRINCIPAL" in table and "User:alice" in table and prefix in table

    assert main(["acls", "delete", *common, "--allow-principal", "User:alice", "--operation", "write",
                 "--topic", prefix + ".", "--resource-pattern-type", "prefixed", "--json"]) == 0
    assert [r["operation"] for r in json.loads(capsys.readouterr().out)] == ["WRITE"]
    assert isinstance(produce(sasl_broker, topic, b"x"), KafkaError)

    # Refused: a bad operation is a usage error; alice may not manage ACLs.
    assert main(["acls", "create", *common, "--allow-principal", "User:x", "--operation", "fly",
                 "--topic", "t"]) == 1
    alice = tmp_path / "alice.properties"
    alice.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.username=alice\nsasl.password=alice-secret\n")
    assert main(["acls", "create", "-b", sasl_broker.bootstrap, "--command-config", str(alice),
                 "--allow-principal", "User:alice", "--topic", "t"]) == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err


def test_odradek_acls_producer_and_consumer_sets(sasl_broker, tmp_path, capsys):
    import json

    from broker.admin import main
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.username=admin\nsasl.password=admin-secret\n")
    common = ["-b", sasl_broker.bootstrap, "--command-config", str(config)]
    topic, group = f"sets-{uuid.uuid4().hex[:6]}", f"sets-g-{uuid.uuid4().hex[:6]}"
    new_topic(admin_client(sasl_broker), topic)
    assert main(["acls", "create", *common, "--allow-principal", "User:alice", "--producer",
                 "--consumer", "--topic", topic, "--group", group, "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert sorted((r["resource_type"], r["operation"]) for r in created) == [
        ("GROUP", "READ"), ("TOPIC", "CREATE"), ("TOPIC", "DESCRIBE"), ("TOPIC", "READ"),
        ("TOPIC", "WRITE")]
    assert produce(sasl_broker, topic, b"via --producer") is None
    assert consume_one(sasl_broker, topic, group) == b"via --producer"
    assert main(["acls", "delete", *common, "--allow-principal", "User:alice", "--consumer",
                 "--topic", topic, "--group", group, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
