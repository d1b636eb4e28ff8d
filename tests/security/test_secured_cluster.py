"""A 3-node cluster with every listener secured, in real processes, with certificates made here.

Each node (broker and controller; with -m slow also dedicated controllers + brokers) listens on
- CLIENT (SASL_SSL, PLAIN and SCRAM-SHA-256) for clients,
- INTERNAL (SSL, client certificates required: mTLS) for replica fetches and inter-broker requests
  (``inter.broker.listener.name``),
- CONTROLLER (SASL_SSL, PLAIN, ``sasl.mechanism.controller.protocol``; in the split variant SSL with
  client certificates required) for the metadata quorum,
  broker registration, heartbeats and forwarded admin requests,
with the StandardAuthorizer on and the brokers' principals (``User:broker`` from the certificate and
from the controller listener's JAAS entry) in ``super.users``, as Kafka documents.

Checked: the quorum forms and every broker registers over the secured listeners; a client principal
without ACLs is refused; ACLs and a SCRAM credential created through a broker that is not the active
controller are forwarded, committed and enforced by every broker; confluent-kafka and the Java client
produce with acks=all to a topic of replication factor 3 and read back every record; each follower
holds the leader's log (replication over mTLS); a replica Fetch from a principal without
CLUSTER_ACTION is refused; a node without the right certificate or password gets nothing from the
INTERNAL and CONTROLLER listeners.
"""

from __future__ import annotations

import os
import socket
import ssl
import sys
import uuid

import pytest

from broker.admin.client import BrokerConnection
from broker.security.client import ClientSecurity
from broker.security.pki import make_pki
from broker.testing_cluster import Cluster, free_port, running_cluster
from protocol import ErrorCode, messages as m

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "compat-tests"))

BROKER_SECRET = "broker-secret"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"
CONTROLLER_JAAS = (f'{PLAIN_MODULE} username="broker" password="{BROKER_SECRET}" '
                   f'user_broker="{BROKER_SECRET}" user_mallory="mallory-secret";')
CLIENT_JAAS = (f'{PLAIN_MODULE} username="broker" password="{BROKER_SECRET}" '
               'user_admin="admin-secret" user_mallory="mallory-secret";')


def _settings(pki) -> dict:
    return {
        "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.path("server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.path("ca.pem"),
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.internal.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
        "listener.name.client.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.client.plain.sasl.jaas.config": CLIENT_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker;User:admin",
        "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "2",
    }


# The split variant's CONTROLLER is SSL with client certificates required (mTLS) instead.
MTLS_CONTROLLER = {
    "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SSL,CONTROLLER:SSL",
    "listener.name.controller.ssl.client.auth": "required",
    "listener.name.controller.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
}


def _certificate_properties(pki, keystore: str) -> dict:
    return {"security.protocol": "SSL", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki.path(keystore), "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki.path("ca.pem")}


def _client_properties(pki, user: str, password: str, mechanism: str = "PLAIN") -> dict:
    module = (PLAIN_MODULE if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule required")
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} username="{user}" password="{password}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem")}


class SecuredCluster(Cluster):
    """The harness's cluster, observed over the secured listeners."""

    def __init__(self, root, pki, topology: str = "combined"):
        self.controller_mtls = topology == "split"
        settings = {**_settings(pki), **(MTLS_CONTROLLER if self.controller_mtls else {})}
        super().__init__(root, 3, topology, overrides=settings)
        self.pki = pki
        self.admin_security = ClientSecurity.from_properties(
            _client_properties(pki, "admin", "admin-secret"))
        with open(pki.path("alice.pem"), "wb") as handle:   # a CA-signed certificate, not a node's
            handle.write(open(pki.path("client-key.pem"), "rb").read()
                         + open(pki.path("client-cert.pem"), "rb").read())
        if self.controller_mtls:
            self.controller_security = ClientSecurity.from_properties(
                _certificate_properties(pki, "server.pem"))
            self.outsider_on_controller = ClientSecurity.from_properties(   # User:alice
                _certificate_properties(pki, "alice.pem"))
            self.refused_on_controller = ClientSecurity.from_properties(    # no certificate
                {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                 "ssl.truststore.location": pki.path("ca.pem")})
        else:
            self.controller_security = ClientSecurity.from_properties(
                _client_properties(pki, "broker", BROKER_SECRET))
            self.outsider_on_controller = ClientSecurity.from_properties(
                _client_properties(pki, "mallory", "mallory-secret"))
            self.refused_on_controller = ClientSecurity.from_properties(
                _client_properties(pki, "broker", "guess"))
        self.internal_ports = {}
        for node in self.nodes.values():
            listeners = []
            if node.is_broker:
                internal = self.internal_ports[node.node_id] = free_port()
                listeners += [f"CLIENT://127.0.0.1:{node.port}",
                              f"INTERNAL://127.0.0.1:{internal}"]
            if node.is_controller:
                listeners.append(f"CONTROLLER://127.0.0.1:{node.controller_port}")
            node.settings["listeners"] = ",".join(listeners)

    def connect(self, address, security) -> BrokerConnection:
        return BrokerConnection(*address, security=security, timeout=30)

    def metadata(self, node_id: int, topics=None):
        R = m.MetadataRequest
        connection = self.connect(self.nodes[node_id].address, self.admin_security)
        try:
            return connection.request(3, lambda v: R(
                topics=None if topics is None else [R.MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=False), max_version=12)[1]
        finally:
            connection.close()

    def describe_quorum(self, node_id: int | None = None):
        from broker.cluster.discovery import describe_quorum_request

        last = None
        for candidate in [node_id] if node_id is not None else self.controllers:
            node = self.nodes[candidate]
            if not node.running:
                continue
            try:
                connection = self.connect(("127.0.0.1", node.controller_port),
                                          self.controller_security)
            except OSError:
                continue
            try:
                last = connection.request(55, describe_quorum_request(), max_version=2)[1]
            finally:
                connection.close()
            if not last.topics[0].partitions[0].error_code:
                return last
        return last


@pytest.fixture(scope="module", params=["combined", pytest.param("split", marks=pytest.mark.slow)])
def secured_cluster(request, tmp_path_factory):
    """combined: 3 × broker+controller; split (-m slow): 3 dedicated controllers and 3 brokers
    that reach the controller listener as clients only (its protocol from the map)."""
    root = tmp_path_factory.mktemp(f"secured-{request.param}")
    cluster = SecuredCluster(root, make_pki(root / "pki"), request.param)
    with running_cluster(root, cluster=cluster, timeout=120) as running:
        yield running


def _admin_run(cluster, *args):
    """`odradek` admin CLI against the cluster with admin's --command-config."""
    import subprocess
    path = os.path.join(cluster.pki.directory, "admin.properties")
    with open(path, "w") as handle:
        handle.writelines(f"{k}={v}\n" for k, v in
                          _client_properties(cluster.pki, "admin", "admin-secret").items())
    result = subprocess.run([sys.executable, "-m", "broker.cli", *args, "-b", cluster.bootstrap,
                             "--command-config", path], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _non_active_broker(cluster) -> int:
    active = cluster.active_controller()
    return next(b for b in cluster.brokers if b != active)


def test_quorum_and_registration_over_secured_listeners(secured_cluster):
    quorum = secured_cluster.describe_quorum()
    partition = quorum.topics[0].partitions[0]
    assert partition.leader_id in secured_cluster.controllers
    assert {v.replica_id for v in partition.current_voters} == set(secured_cluster.controllers)
    # every voter fetches the metadata log from the leader: its end offset is known and recent
    assert all(v.log_end_offset >= 0 for v in partition.current_voters)
    for node_id in secured_cluster.brokers:
        brokers = secured_cluster.metadata(node_id).brokers
        assert sorted(b.node_id for b in brokers) == secured_cluster.brokers
        # clients are told about CLIENT only (the listener they came in on)
        assert {b.port for b in brokers} == {secured_cluster.nodes[n].port
                                             for n in secured_cluster.brokers}


def test_nodes_without_credentials_get_nothing(secured_cluster):
    pki = secured_cluster.pki
    broker, controller = secured_cluster.brokers[0], secured_cluster.controllers[0]
    # INTERNAL requires a client certificate
    context = ssl.create_default_context(cafile=pki.path("ca.pem"))
    with socket.create_connection(("127.0.0.1", secured_cluster.internal_ports[broker]), 10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\x00\x00\x00\x00")
                if not tls.recv(1):
                    raise ConnectionError("closed")
    # CONTROLLER refuses a wrong password (SASL_SSL) or a client without a certificate (mTLS)
    with pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED|Authentication failed|"
                                        "TLS handshake|closed|reset|EOF"):
        connection = secured_cluster.connect(
            ("127.0.0.1", secured_cluster.nodes[controller].controller_port),
            secured_cluster.refused_on_controller)
        connection.close()


def test_controller_listener_needs_cluster_action(secured_cluster):
    """Authenticated is not enough on CONTROLLER: a principal that is not a node's (mallory by
    PLAIN, or alice by her certificate on the mTLS variant; no ACLs, not a super user) is refused
    DescribeQuorum (DESCRIBE) and BrokerHeartbeat (CLUSTER_ACTION) with Kafka's code."""
    from broker.cluster.discovery import describe_quorum_request

    controller = secured_cluster.nodes[secured_cluster.controllers[0]]
    connection = secured_cluster.connect(("127.0.0.1", controller.controller_port),
                                         secured_cluster.outsider_on_controller)
    try:
        _, quorum = connection.request(55, describe_quorum_request(), max_version=2)
        _, heartbeat = connection.request(63, m.BrokerHeartbeatRequest(
            broker_id=controller.node_id, broker_epoch=1, current_metadata_offset=0,
            want_fence=False, want_shut_down=False), max_version=1)
    finally:
        connection.close()
    assert quorum.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert heartbeat.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_replica_fetch_needs_cluster_action(secured_cluster):
    """A Fetch with a replica id (a follower's) from a principal without CLUSTER_ACTION gets
    TOPIC_AUTHORIZATION_FAILED on every partition, as in Kafka; from a super user it is served."""
    cluster = secured_cluster
    topic = f"fetch-{uuid.uuid4().hex[:8]}"
    C = m.CreateTopicsRequest
    first = cluster.brokers[0]
    connection = cluster.connect(cluster.nodes[first].address, cluster.admin_security)
    try:
        _, created = connection.request(19, C(topics=[C.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=3)], timeout_ms=30000),
            max_version=7)
    finally:
        connection.close()
    assert created.topics[0].error_code == 0
    leader = cluster.wait_until(lambda: max(
        cluster.metadata(first, [topic]).topics[0].partitions[0].leader_id, 0), 30, "a leader")
    R = m.FetchRequest
    follower = next(n for n in cluster.brokers if n != leader)
    body = lambda v: R(replica_id=follower, max_wait_ms=0, min_bytes=0, max_bytes=1024,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[R.FetchTopic(
                           topic=topic, partitions=[R.FetchPartition(
                               partition=0, fetch_offset=0, partition_max_bytes=1024)])],
                       forgotten_topics_data=[], rack_id="")

    def fetch_as(security):
        connection = cluster.connect(cluster.nodes[leader].address, security)
        try:
            return connection.request(1, body, max_version=12)[1]
        finally:
            connection.close()
    mallory = ClientSecurity.from_properties(
        _client_properties(cluster.pki, "mallory", "mallory-secret"))
    refused = fetch_as(mallory)
    assert refused.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    served = fetch_as(cluster.admin_security)
    assert served.error_code == 0
    assert served.responses[0].partitions[0].error_code == 0


def test_clients_produce_acks_all_rf3_and_consume_over_sasl_ssl(secured_cluster, tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster, pki = secured_cluster, secured_cluster.pki
    topic, group = f"secured-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    # through a broker that is not the active controller: CreateTopics, AlterUserScramCredentials
    # and CreateAcls are forwarded over the secured controller listener
    via = cluster.nodes[_non_active_broker(cluster)]
    admin_conf = {"bootstrap.servers": f"127.0.0.1:{via.port}", "security.protocol": "SASL_SSL",
                  "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                  "sasl.password": "admin-secret", "ssl.ca.location": pki.path("ca.pem")}
    admin = AdminClient(admin_conf)
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(60)
    _admin_run(cluster, "users", "scram", "set", "alice", "--mechanism", "SCRAM-SHA-256",
               "--password", "alice-scram")
    alice = {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_SSL",
             "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
             "sasl.password": "alice-scram", "ssl.ca.location": pki.path("ca.pem")}

    # no ACL yet: alice is authenticated (SCRAM through the cluster) but may not write
    denied = []
    producer = confluent_kafka.Producer({**alice, "acks": "all", "message.timeout.ms": 20000})
    producer.produce(topic, b"refused", on_delivery=lambda err, msg: denied.append(err))
    producer.flush(40)
    assert denied and denied[0] is not None and denied[0].code() == \
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED, denied

    _admin_run(cluster, "acls", "create", "--allow-principal", "User:alice", "--producer",
               "--topic", topic)
    _admin_run(cluster, "acls", "create", "--allow-principal", "User:alice", "--consumer",
               "--topic", topic, "--group", group)

    # every broker applies the forwarded ACLs: retry until alice's writes go through
    values = [f"v{i}".encode() for i in range(200)]

    def produce_all():
        failures = []
        producer = confluent_kafka.Producer({**alice, "acks": "all", "enable.idempotence": True,
                                             "message.timeout.ms": 30000})
        for i, value in enumerate(values):
            producer.produce(topic, value, key=b"k%d" % i,
                             on_delivery=lambda err, msg: err and failures.append(err))
        producer.flush(60)
        return not failures
    cluster.wait_until(produce_all, 90, "alice's acks=all writes to succeed")

    consumer = confluent_kafka.Consumer({**alice, "group.id": group,
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    try:
        deadline_polls = 600
        while len(got) < len(values) and deadline_polls:
            deadline_polls -= 1
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
    finally:
        consumer.close()
    # produce_all may have been retried: every value arrived, at least once, none lost
    assert set(got) == set(values)

    # followers caught up over mTLS: every replica of every partition is in sync
    metadata = cluster.metadata(cluster.brokers[0], [topic])
    for partition in metadata.topics[0].partitions:
        assert sorted(partition.replica_nodes) == cluster.brokers
    cluster.wait_until(lambda: all(
        sorted(p.isr_nodes) == cluster.brokers
        for p in cluster.metadata(cluster.brokers[0], [topic]).topics[0].partitions),
        60, "every replica in sync")

    # the Java client, acks=all (its default, idempotent), over SASL_SSL with SCRAM
    from odradek_compat.clients import java
    from odradek_compat.records import Rec
    if java.jars_missing("java-4"):
        pytest.skip(java.jars_missing("java-4"))
    path = tmp_path / "java.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in _client_properties(
        pki, "alice", "alice-scram", "SCRAM-SHA-256").items()))
    client = java.JavaClient(cluster.bootstrap, "java-4", str(path))
    try:
        records = [Rec(key=b"j%d" % i, value=b"java-%d" % i) for i in range(20)]
        deliveries = client.produce(topic, records, acks="all", timeout=90)
        assert all(d.error is None for d in deliveries), deliveries
        read = client.consume(topic, timeout=90)
        java_values = {r.value for r in read}
        assert {r.value for r in records} <= java_values
        assert set(values) <= java_values
    finally:
        client.close()


def test_transactions_write_markers_across_brokers(secured_cluster):
    """A transactional producer (non-super user alice) commits to partitions led by several
    brokers: the coordinator's WriteTxnMarkers go over INTERNAL with its certificate principal
    (a super user: CLUSTER_ACTION), and read_committed consumers see the committed records only."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster, pki = secured_cluster, secured_cluster.pki
    topic, txn = f"txn-{uuid.uuid4().hex[:8]}", f"tx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_SSL",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                         "sasl.password": "admin-secret", "ssl.ca.location": pki.path("ca.pem")})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
    cluster.wait_until(lambda: len({p.leader_id for p in cluster.metadata(
        cluster.brokers[0], [topic]).topics[0].partitions} - {-1}) >= 2, 30,
        "partitions led by more than one broker")
    _admin_run(cluster, "users", "scram", "set", "alice", "--mechanism", "SCRAM-SHA-256",
               "--password", "alice-scram")
    _admin_run(cluster, "acls", "create", "--allow-principal", "User:alice", "--producer",
               "--topic", topic, "--transactional-id", txn)
    _admin_run(cluster, "acls", "create", "--allow-principal", "User:alice", "--operation", "Read",
               "--topic", topic)
    alice = {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_SSL",
             "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
             "sasl.password": "alice-scram", "ssl.ca.location": pki.path("ca.pem")}

    def committed_transaction():
        producer = confluent_kafka.Producer({**alice, "transactional.id": txn,
                                             "transaction.timeout.ms": 30000})
        try:
            producer.init_transactions(30)
            producer.begin_transaction()
            for partition in range(3):
                producer.produce(topic, b"aborted", partition=partition)
            producer.abort_transaction(30)
            producer.begin_transaction()
            for partition in range(3):
                producer.produce(topic, b"committed-%d" % partition, partition=partition)
            producer.commit_transaction(30)
            return True
        except confluent_kafka.KafkaException as exc:   # ACLs still reaching a broker: retry
            print("transaction attempt failed:", exc)
            return False
    cluster.wait_until(committed_transaction, 120, "alice's transaction to commit")

    consumer = confluent_kafka.Consumer({**alice, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                         "isolation.level": "read_committed",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(3)])
    got = []
    try:
        for _ in range(240):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
            if len(set(got)) == 3:
                break
    finally:
        consumer.close()
    assert b"aborted" not in got
    assert set(got) == {b"committed-0", b"committed-1", b"committed-2"}
