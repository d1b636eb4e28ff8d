"""SCRAM credentials through the admin APIs (KIP-554) and ``odradek users scram`` with Kafka's
client properties file (``--command-config``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from protocol import ErrorCode, messages

from broker.admin.client import KafkaClient
from broker.security.client import ClientSecurity
from broker.security.sasl.scram import salted_password
from tests.security.conftest import SCRAM_USERS

Upsertion = messages.AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion = messages.AlterUserScramCredentialsRequest.ScramCredentialDeletion


def _alter(client, deletions=(), upsertions=()):
    _, response = client.any_broker().request(51, messages.AlterUserScramCredentialsRequest(
        deletions=list(deletions), upsertions=list(upsertions)))
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def _upsert(name, mechanism=1, iterations=4096):
    salt = b"0123456789abcdef"
    return Upsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                     salted_password=salted_password("SCRAM-SHA-256", "pw", salt, 4096))


def test_alter_errors_are_kafkas(secure_broker):
    with KafkaClient(secure_broker.address("PLAINTEXT")) as client:
        results = _alter(client, deletions=[Deletion(name="ghost", mechanism=1)],
                         upsertions=[_upsert("few", iterations=4095),
                                     _upsert("many", iterations=16385),
                                     _upsert("odd", mechanism=7), _upsert(""),
                                     _upsert("twice"), _upsert("twice")])
        assert results["ghost"] == (ErrorCode.RESOURCE_NOT_FOUND,
                                    "Attempt to delete a user credential that does not exist")
        assert results["few"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        assert results["many"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        assert results["odd"] == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        assert results[""][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
        assert results["twice"][0] == ErrorCode.DUPLICATE_RESOURCE
        # as Kafka 3.9: a user altered twice in one request, whatever the mechanisms, is refused
        # whole; a user's first error stands (its deletion of a missing credential)
        results = _alter(client, deletions=[Deletion(name="gone", mechanism=1)],
                         upsertions=[_upsert("both"), _upsert("both", mechanism=2), _upsert("gone", mechanism=2)])
        assert results["both"] == (ErrorCode.DUPLICATE_RESOURCE,
                                   "A user credential cannot be altered twice in the same request")
        assert results["gone"][0] == ErrorCode.RESOURCE_NOT_FOUND
        _, described = client.any_broker().request(50, messages.DescribeUserScramCredentialsRequest(
            users=None))
        users = {r.user for r in described.results}
        assert users == set(SCRAM_USERS)   # nothing above was written


def _odradek(*args, stdin=None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def scram_properties(secure_broker, tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{SCRAM_USERS["alice"]}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={secure_broker.pki.path('ca.pem')}\n")
    return str(path)


def test_users_scram_cli_over_sasl_ssl(secure_broker, scram_properties):
    bootstrap = ["-b", secure_broker.address("SASL_SSL"), "--command-config", scram_properties]
    done = _odradek("users", "scram", "set", "frank", "-m", "SCRAM-SHA-512", "--iterations",
                    "8192", "--password-stdin", *bootstrap, stdin="frank-pw\n")
    assert done.returncode == 0, done.stderr
    described = _odradek("users", "scram", "describe", "frank", "--json", *bootstrap)
    assert json.loads(described.stdout) == {"frank": {"SCRAM-SHA-512": 8192}}
    # frank can now log in with SCRAM-SHA-512
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "frank", "sasl.password": "frank-pw"})
    with KafkaClient(secure_broker.address("SASL_PLAINTEXT"), security=security) as client:
        assert client.metadata().brokers
    assert _odradek("users", "scram", "delete", "frank", *bootstrap).returncode == 1  # no 256
    assert _odradek("users", "scram", "delete", "frank", "-m", "SCRAM-SHA-512",
                    *bootstrap).returncode == 0
    gone = _odradek("users", "scram", "describe", "frank", *bootstrap)
    assert gone.returncode == 1 and "RESOURCE_NOT_FOUND" in gone.stderr


def test_command_config_wrong_password_is_reported(secure_broker, tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.username=alice\nsasl.password=wrong\n")
    done = _odradek("topics", "list", "-b", secure_broker.address("SASL_PLAINTEXT"),
                    "--command-config", str(path))
    assert done.returncode == 1
    assert "SASL_AUTHENTICATION_FAILED" in done.stderr and "wrong" not in done.stderr


def test_command_config_tls_client_certificate(secure_broker, tmp_path):
    pki = secure_broker.pki
    path = tmp_path / "mtls.properties"
    path.write_text(f"security.protocol=SSL\nssl.keystore.type=PKCS12\n"
                    f"ssl.keystore.location={pki.path('client.p12')}\n"
                    f"ssl.keystore.password=storepass\nssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={pki.path('ca.pem')}\n")
    done = _odradek("cluster", "describe", "-b", secure_broker.address("MTLS"),
                    "--command-config", str(path))
    assert done.returncode == 0, done.stderr


def test_broker_side_client_security_for_inter_broker_connections(secure_broker):
    """What a broker uses to reach another node's SASL_SSL listener: that listener's ssl.* and the
    username/password of its JAAS entry (here PLAIN's admin), as Kafka does."""
    from broker.config import BrokerConfig, Listener
    from broker.security.client import broker_client_security
    config = BrokerConfig({**secure_broker.config,
                           "log.dirs": "/nonexistent", "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    listener = Listener("SASL_SSL", "SASL_SSL", "127.0.0.1", secure_broker.ports["SASL_SSL"])
    security = broker_client_security(config, listener)
    with KafkaClient(secure_broker.address("SASL_SSL"), security=security) as client:
        assert client.metadata().brokers
        assert "User:admin" in secure_broker.principals()


def test_scram_credentials_survive_a_restart(tmp_path):
    from broker.admin.users import set_credential
    from broker.testing import running_broker
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "gina", "sasl.password": "gina-pw"})
    for round_ in range(2):
        with running_broker(tmp_path, config) as running:
            ports = {l.name: p for l, p in running.broker._bound}
            if round_ == 0:
                with KafkaClient(f"127.0.0.1:{ports['PLAINTEXT']}") as client:
                    set_credential(client, "gina", "SCRAM-SHA-256", "gina-pw", 4096)
            with KafkaClient(f"127.0.0.1:{ports['SASL_PLAINTEXT']}", security=security) as client:
                assert client.metadata().brokers


def test_describe_configs_never_shows_secrets(secure_broker):
    from broker.admin.configs import BROKER, describe_configs
    with KafkaClient(secure_broker.address("PLAINTEXT")) as client:
        entries = describe_configs(client, BROKER, str(secure_broker.broker.node_id))
    values = " ".join(str(e.value) for e in entries)
    for secret in ("alice-secret", "admin-secret", "storepass", "PRIVATE KEY"):
        assert secret not in values
    sensitive = {e.name: e for e in entries if e.sensitive}
    assert "ssl.keystore.password" in sensitive and sensitive["ssl.keystore.password"].value is None


def test_endpoint_identification_of_the_broker_side_client(secure_broker):
    """ssl.endpoint.identification.algorithm=https (Kafka's default) refuses a certificate for
    another host; empty turns the host name check off (the CA is still checked)."""
    from broker.admin.client import KafkaError
    trust = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": secure_broker.pki.path("ca.pem")}
    with pytest.raises(KafkaError, match="TLS handshake"):
        with KafkaClient(secure_broker.address("WRONGHOST"),
                         security=ClientSecurity.from_properties(trust)) as client:
            client.metadata()
    relaxed = ClientSecurity.from_properties({**trust,
                                              "ssl.endpoint.identification.algorithm": ""})
    with KafkaClient(secure_broker.address("WRONGHOST"), security=relaxed) as client:
        assert client.metadata().brokers
    with pytest.raises(KafkaError, match="TLS handshake"):
        with KafkaClient(secure_broker.address("WRONGCA"), security=relaxed) as client:
            client.metadata()
