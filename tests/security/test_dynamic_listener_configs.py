"""Per-listener TLS and SASL settings changed at runtime (Kafka's dynamic listener configs): no restart.

A listener starts with an expired certificate; IncrementalAlterConfigs of this broker's
`listener.name.<listener>.ssl.keystore.location` puts a renewed one in place and the next TLS
handshake verifies. A key store that does not load,
or whose certificate names other hosts than the one served, is refused at alter time with
INVALID_REQUEST (as Kafka validates it, ssl.allow.san.changes being false) and changes nothing.
A listener's PLAIN JAAS config altered the same way admits a new user on the next connection.
"""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from broker.security.pki import make_pki
from broker.testing import running_broker
from protocol import ErrorCode, messages
from tests.broker.raw_client import RawClient

BROKER = 4
I = messages.IncrementalAlterConfigsRequest
KEY = "listener.name.renew.ssl.keystore.location"


def _handshake(port: int, ca: str) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=ca)
    context.check_hostname = False   # the test certificates name "broker", not 127.0.0.1
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return context.wrap_socket(sock)


def _verifies(port: int, ca: str) -> bool:
    try:
        _handshake(port, ca).close()
        return True
    except ssl.SSLCertVerificationError:
        return False


def _alter(client: RawClient, node_id: int, value: str, validate_only: bool = False):
    return client.request(44, 1, I(resources=[I.AlterConfigsResource(
        resource_type=BROKER, resource_name=str(node_id),
        configs=[I.AlterableConfig(name=KEY, config_operation=0, value=value)])],
        validate_only=validate_only)).responses[0]


@pytest.fixture
def renewing_broker(tmp_path):
    pki = make_pki(tmp_path / "pki")
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,RENEW://127.0.0.1:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,RENEW:SSL",
              "ssl.keystore.type": "PEM", KEY: pki.path("server-expired.pem")}
    with running_broker(tmp_path / "data", config) as running:
        ports = {listener.name: port for listener, port in running.broker._bound}
        yield running.broker, ports, pki


def test_a_renewed_keystore_takes_effect_without_a_restart(renewing_broker):
    broker, ports, pki = renewing_broker
    ca = pki.path("ca.pem")
    assert not _verifies(ports["RENEW"], ca)              # expired: the client refuses it
    with RawClient("127.0.0.1", ports["PLAINTEXT"], timeout=30) as client:
        bad = _alter(client, broker.node_id, pki.path("no-such-store.pem"))
        assert bad.error_code == ErrorCode.INVALID_REQUEST
        assert "listener RENEW" in bad.error_message
        other_host = _alter(client, broker.node_id, pki.path("server-wrong-host.pem"))
        assert other_host.error_code == ErrorCode.INVALID_REQUEST
        assert "Keystore SubjectAltNames do not match" in other_host.error_message
        assert _alter(client, broker.node_id, pki.path("server.pem"), validate_only=True).error_code == 0
        assert not _verifies(ports["RENEW"], ca)          # neither changed anything
        assert _alter(client, broker.node_id, pki.path("server.pem")).error_code == 0
    deadline = time.monotonic() + 30
    while not _verifies(ports["RENEW"], ca):              # the metadata log carries it to the broker
        assert time.monotonic() < deadline, "the renewed certificate was not served"
        time.sleep(0.1)
    renewed = _handshake(ports["RENEW"], ca)
    assert (("commonName", "broker"),) in renewed.getpeercert()["subject"]
    renewed.close()


def _plain_jaas(users: dict[str, str]) -> str:
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{name}="{password}"' for name, password in users.items()) + ";")


def _authenticates(port: int, user: str, password: str) -> bool:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password})
    try:
        admin.list_topics(timeout=10)
        return True
    except KafkaException:
        return False


def test_a_listener_jaas_config_altered_at_runtime_admits_a_new_user(tmp_path):
    pytest.importorskip("confluent_kafka")
    key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "sasl.enabled.mechanisms": "PLAIN", key: _plain_jaas({"alice": "alice-secret"})}
    with running_broker(tmp_path / "data", config) as running:
        ports = {listener.name: port for listener, port in running.broker._bound}
        assert _authenticates(ports["SASL_PLAINTEXT"], "alice", "alice-secret")
        assert not _authenticates(ports["SASL_PLAINTEXT"], "bob", "bob-secret")
        with RawClient("127.0.0.1", ports["PLAINTEXT"], timeout=30) as client:
            answer = client.request(44, 1, I(resources=[I.AlterConfigsResource(
                resource_type=BROKER, resource_name=str(running.broker.node_id),
                configs=[I.AlterableConfig(name=key, config_operation=0, value=_plain_jaas(
                    {"alice": "alice-secret", "bob": "bob-secret"}))])], validate_only=False))
            assert answer.responses[0].error_code == 0
        deadline = time.monotonic() + 30
        while not _authenticates(ports["SASL_PLAINTEXT"], "bob", "bob-secret"):
            assert time.monotonic() < deadline, "the new user was not admitted"
            time.sleep(0.2)
        assert _authenticates(ports["SASL_PLAINTEXT"], "alice", "alice-secret")
