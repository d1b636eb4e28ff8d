"""The Java Admin (kafka-clients 4.x) creates, describes, renews and expires a delegation token
against a real ``odradek serve``; a Java producer and consumer log in with the token (SCRAM,
tokenauth=true) and move records (tests/security/clients/TokenCheck.java prints the facts). The
expected facts are Kafka 3.9's; the slow test checks them against the reference Kafka itself."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from tests.java_clients import JAVA, MISSING, compile_check, java_available
from tests.security.token_brokers import add_users, odradek_serve, password, start_kafka, wait_for_login

HERE = os.path.dirname(os.path.abspath(__file__))

FACTS = {
    "create.owner": "User:alice",
    "create.requester": "User:alice",
    "create.renewers": "[User:renewer]",
    "create.expiry_after_issue": "86400000",
    "create.max_after_issue": "604800000",
    "create.hmac_bytes": "64",
    "describe.created": "owner=User:alice requester=User:alice renewers=[User:renewer]",
    "renew.in_a_minute": "true",
    "renew.unknown": "DelegationTokenNotFoundException",
    "token.produce": "ok",
    "token.consume": "v0,v1,v2,v3,v4",
    "token.create_token": "UnsupportedByAuthenticationException",
    "token.describe_topic": "ok",
    "token.wrong_hmac_produce": "SaslAuthenticationException",
    "expire.now": "ok",
    "describe.expired": "absent",
    "token.after_expiry_produce": "SaslAuthenticationException",
}


@pytest.fixture(scope="module")
def classpath(tmp_path_factory):
    if not java_available():
        pytest.skip(MISSING)
    return compile_check(os.path.join(HERE, "clients", "TokenCheck.java"),
                         tmp_path_factory.mktemp("classes"))


def token_facts(classpath: str, sasl_bootstrap: str) -> dict:
    topic = f"tokens-{uuid.uuid4().hex[:8]}"
    run = subprocess.run(JAVA + ["-cp", classpath, "TokenCheck", sasl_bootstrap, "alice",
                                 password("alice"), topic],
                         capture_output=True, text=True, timeout=150)
    assert run.returncode == 0, run.stderr[-3000:]
    return dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)


def test_java_admin_and_token_clients_against_odradek(classpath, tmp_path):
    process, broker = odradek_serve(tmp_path / "data", {})
    try:
        add_users(broker.plain)
        assert token_facts(classpath, broker.sasl) == FACTS
    finally:
        process.stop()


@pytest.mark.slow
def test_kafka_answers_the_same_facts(classpath, tmp_path):
    from tests import apache_kafka as oracle
    if oracle.skip_reason():
        pytest.skip(oracle.skip_reason())
    kafka, broker = start_kafka(tmp_path, {})
    try:
        add_users(broker.plain)
        wait_for_login(broker.sasl)
        assert token_facts(classpath, broker.sasl) == FACTS
    finally:
        kafka.stop()
