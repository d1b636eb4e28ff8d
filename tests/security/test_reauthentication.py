"""KIP-368 re-authentication: session lifetime in SaslAuthenticate, re-authentication on the same
connection with the same principal, and the connection closed when a session ends without it."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from protocol import ErrorCode, messages
from broker.testing import running_broker
from broker.security.sasl.oauthbearer import client_initial_response
from tests.security.conftest import PLAIN_JAAS
from test_sasl_protocol import Wire
from tokens import unsecured_token

REAUTH_MS = 1500


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory):
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
              "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
              "connections.max.reauth.ms": str(REAUTH_MS)}
    with running_broker(tmp_path_factory.mktemp("reauth"), config) as running:
        yield running


def _login(wire, user="alice", password="alice-secret"):
    assert wire.handshake("PLAIN").error_code == 0
    return wire.authenticate(f"\0{user}\0{password}".encode())


def test_session_lifetime_is_returned_and_enforced(reauth_broker):
    wire = Wire(reauth_broker.bootstrap)
    answer = _login(wire)
    assert answer.error_code == 0
    assert 0 < answer.session_lifetime_ms <= REAUTH_MS
    assert wire.metadata().brokers
    time.sleep(REAUTH_MS / 1000 + 0.3)
    wire.send(3, 12, messages.MetadataRequest(
        topics=None, allow_auto_topic_creation=False))
    assert wire.closed_by_broker()
    wire.close()


def test_reauthentication_keeps_the_connection(reauth_broker):
    wire = Wire(reauth_broker.bootstrap)
    _login(wire)
    time.sleep(REAUTH_MS / 2000)
    again = _login(wire)
    assert again.error_code == 0 and again.session_lifetime_ms > 0
    time.sleep(REAUTH_MS / 2000 + 0.3)   # past the first session's end, inside the second
    assert wire.metadata().brokers
    wire.close()


def test_reauthentication_as_someone_else_fails_and_closes(reauth_broker):
    wire = Wire(reauth_broker.bootstrap)
    _login(wire)
    answer = _login(wire, "admin", "admin-secret")
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals during re-authentication" in answer.error_message
    assert wire.closed_by_broker()
    wire.close()


def test_token_expiry_caps_the_session(reauth_broker):
    wire = Wire(reauth_broker.bootstrap)
    assert wire.handshake("OAUTHBEARER").error_code == 0
    answer = wire.authenticate(client_initial_response(unsecured_token("carol", lifetime=1)))
    assert answer.error_code == 0
    assert answer.session_lifetime_ms <= 1000
    wire.close()


def test_librdkafka_reauthenticates_and_keeps_producing(reauth_broker):
    audit = reauth_broker.broker.auth_audit
    producer = confluent_kafka.Producer({
        "bootstrap.servers": reauth_broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"})
    deadline = time.monotonic() + 20
    delivered = []
    while time.monotonic() < deadline:
        producer.produce("reauth-topic", b"x", on_delivery=lambda e, m: delivered.append(e))
        producer.flush(10)
        if audit._counts.get("SASL_PLAINTEXT", [0, 0, 0])[2] >= 2 and len(delivered) > 10:
            break
        time.sleep(0.2)
    assert audit._counts["SASL_PLAINTEXT"][2] >= 2   # successful re-authentications
    assert delivered and all(e is None for e in delivered)
