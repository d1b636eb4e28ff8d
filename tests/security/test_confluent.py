"""librdkafka (confluent-kafka) over every security protocol and mechanism, data checked."""

from __future__ import annotations

import time
import uuid

import confluent_kafka
import pytest

from tests.security.conftest import SCRAM_USERS
from tokens import unsecured_token


def _topic(label: str) -> str:
    return f"sec-{label}-{uuid.uuid4().hex[:8]}"


def roundtrip(address: str, conf: dict, label: str, count: int = 20) -> list[bytes]:
    """Produce `count` records and consume them back with a group; returns the values read."""
    topic = _topic(label)
    base = {"bootstrap.servers": address, **conf}
    producer = confluent_kafka.Producer({**base, "message.timeout.ms": 30000})
    errors = []
    for i in range(count):
        producer.produce(topic, f"{label}-{i}".encode(), key=str(i).encode(),
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(60) == 0 and not errors, errors
    consumer = confluent_kafka.Consumer({**base, "group.id": f"g-{topic}",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values, deadline = [], time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
    finally:
        consumer.close()
    assert values == [f"{label}-{i}".encode() for i in range(count)]
    return values


def ssl_conf(pki) -> dict:
    return {"security.protocol": "SSL", "ssl.ca.location": pki.path("ca.pem")}


def test_ssl_without_client_certificate_is_anonymous(secure_broker):
    roundtrip(secure_broker.address("SSL"), ssl_conf(secure_broker.pki), "ssl")


def test_mtls_principal_comes_from_the_certificate(secure_broker):
    pki = secure_broker.pki
    conf = {**ssl_conf(pki), "ssl.certificate.location": pki.path("client-cert.pem"),
            "ssl.key.location": pki.path("client-key.pem")}
    producer = confluent_kafka.Producer({"bootstrap.servers": secure_broker.address("MTLS"),
                                         **conf})
    assert producer.list_topics(timeout=30).brokers
    # the mapping rule turns CN=alice,OU=ServiceUsers,... into "alice" (librdkafka replaces its
    # bootstrap connection after the first metadata: wait for the new one)
    deadline = time.monotonic() + 20
    while "User:alice" not in secure_broker.principals() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "User:alice" in secure_broker.principals()
    roundtrip(secure_broker.address("MTLS"), conf, "mtls")
    del producer


def refused(conf: dict, codes) -> None:
    """The client reports one of `codes` through error_cb (and gets no metadata)."""
    failures = []
    producer = confluent_kafka.Producer({**conf, "error_cb": failures.append})
    deadline = time.monotonic() + 30
    while not any(f.code() in codes for f in failures) and time.monotonic() < deadline:
        producer.poll(0.1)
    assert any(f.code() in codes for f in failures), failures
    with pytest.raises(confluent_kafka.KafkaException):
        producer.list_topics(timeout=0.5)


TLS_FAILURES = {confluent_kafka.KafkaError._SSL, confluent_kafka.KafkaError._TRANSPORT}
AUTH_FAILURE = {confluent_kafka.KafkaError._AUTHENTICATION}


def test_mtls_required_refuses_a_client_without_certificate(secure_broker):
    counts = secure_broker.broker.auth_audit._counts
    before = counts.get("MTLS", [0, 0])[1]
    # with TLS 1.3 the client learns of the refusal only as a dropped connection
    refused({"bootstrap.servers": secure_broker.address("MTLS"), **ssl_conf(secure_broker.pki)},
            TLS_FAILURES | {confluent_kafka.KafkaError._ALL_BROKERS_DOWN})
    assert counts["MTLS"][1] > before


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_mechanisms(secure_broker, listener, mechanism):
    password = "alice-secret" if mechanism == "PLAIN" else SCRAM_USERS["alice"]
    conf = {"security.protocol": listener, "sasl.mechanism": mechanism,
            "sasl.username": "alice", "sasl.password": password}
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = secure_broker.pki.path("ca.pem")
    roundtrip(secure_broker.address(listener), conf, f"{listener}-{mechanism}".lower(), count=10)


def test_oauthbearer_unsecured_jwt(secure_broker):
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=carol"}
    roundtrip(secure_broker.address("SASL_PLAINTEXT"), conf, "oauth-unsecured", count=10)


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_oauthbearer_signed_jwt_through_oauth_cb(secure_broker, algorithm):
    issuer = secure_broker.issuer

    def oauth_cb(_config):
        return issuer.token("dave", algorithm=algorithm), time.time() + 3600

    conf = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
            "ssl.ca.location": secure_broker.pki.path("ca.pem"), "oauth_cb": oauth_cb}
    roundtrip(secure_broker.address("SASL_SSL"), conf, f"oauth-{algorithm}".lower(), count=10)


@pytest.mark.parametrize("mechanism,password", [("PLAIN", "nope"), ("SCRAM-SHA-256", "nope"),
                                                ("SCRAM-SHA-512", "alice-secret")])
def test_wrong_credentials_fail(secure_broker, mechanism, password):
    refused({"bootstrap.servers": secure_broker.address("SASL_PLAINTEXT"),
             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
             "sasl.username": "alice", "sasl.password": password}, AUTH_FAILURE)


def test_signed_jwt_from_an_unknown_key_is_refused(secure_broker):
    issuer = secure_broker.issuer
    refused({"bootstrap.servers": secure_broker.address("SASL_SSL"),
             "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
             "ssl.ca.location": secure_broker.pki.path("ca.pem"),
             "oauth_cb": lambda _: (issuer.token("mallory", signer=issuer.stranger),
                                    time.time() + 60)}, AUTH_FAILURE)


@pytest.mark.parametrize("listener", ["EXPIRED", "WRONGCA", "WRONGHOST"])
def test_bad_server_certificates_are_refused_by_the_client(secure_broker, listener):
    refused({"bootstrap.servers": secure_broker.address(listener), **ssl_conf(secure_broker.pki),
             "ssl.endpoint.identification.algorithm": "https"}, TLS_FAILURES)


def test_unsecured_token_is_refused_where_a_jwks_is_configured(secure_broker):
    refused({"bootstrap.servers": secure_broker.address("SASL_SSL"),
             "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
             "ssl.ca.location": secure_broker.pki.path("ca.pem"),
             "oauth_cb": lambda _: (unsecured_token("eve"), time.time() + 60)}, AUTH_FAILURE)


def test_a_clean_tls_close_ends_the_connection_and_nothing_else(secure_broker):
    """A client that sends close_notify (a clean TLS shutdown) mid-frame: the broker sees the end
    of the stream, closes that connection and keeps serving everyone else."""
    import socket
    import ssl
    import struct
    import time

    context = ssl.create_default_context(cafile=secure_broker.pki.path("ca.pem"))
    host, port = secure_broker.address("SSL").split(":")
    raw = socket.create_connection((host, int(port)), timeout=10)
    tls = context.wrap_socket(raw, server_hostname=host)
    tls.sendall(struct.pack(">i", 100) + b"partial")   # a frame that never completes
    try:
        tls.unwrap()                   # sends close_notify; the broker closes without answering it
    except (ssl.SSLError, OSError):
        pass
    raw.close()
    started = time.monotonic()
    from confluent_kafka.admin import AdminClient
    metadata = AdminClient(
        {"bootstrap.servers": secure_broker.address("PLAINTEXT")}).list_topics(timeout=10)
    assert metadata.brokers and time.monotonic() - started < 10
