"""kcat, kafka-python, aiokafka, KafkaJS and the Java client over TLS and SASL, data checked.

KafkaJS and Java run through compat-tests' drivers (which take the clients' own security settings);
they skip when compat-tests/setup.sh has not installed them."""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import subprocess
import sys
import uuid

import pytest

from tests.security.conftest import SCRAM_USERS

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "compat-tests"))

from odradek_compat.records import Rec  # noqa: E402


def _topic(label):
    return f"sec-{label}-{uuid.uuid4().hex[:8]}"


def _values(label, n=10):
    return [f"{label}-{i}".encode() for i in range(n)]


# ------------------------------------------------------------------------------------- kcat
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
@pytest.mark.parametrize("listener,mechanism", [("SSL", None), ("SASL_SSL", "SCRAM-SHA-256"),
                                                ("SASL_PLAINTEXT", "PLAIN")])
def test_kcat(secure_broker, listener, mechanism):
    topic = _topic(f"kcat-{listener}".lower())
    options = ["-b", secure_broker.address(listener), "-X", f"security.protocol={listener}"]
    if listener.endswith("SSL"):
        options += ["-X", f"ssl.ca.location={secure_broker.pki.path('ca.pem')}"]
    if mechanism:
        password = "alice-secret" if mechanism == "PLAIN" else SCRAM_USERS["alice"]
        options += ["-X", f"sasl.mechanisms={mechanism}", "-X", "sasl.username=alice",
                    "-X", f"sasl.password={password}"]
    values = _values("kcat")
    subprocess.run(["kcat", *options, "-P", "-t", topic], input=b"\n".join(values) + b"\n",
                   check=True, timeout=60, capture_output=True)
    out = subprocess.run(["kcat", *options, "-C", "-t", topic, "-o", "beginning", "-e",
                          "-c", str(len(values))], check=True, timeout=60, capture_output=True)
    assert out.stdout.splitlines() == values


# ------------------------------------------------------------------------------ kafka-python
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kafka_python_sasl_ssl(secure_broker, mechanism):
    import kafka
    password = "alice-secret" if mechanism == "PLAIN" else SCRAM_USERS["alice"]
    settings = dict(bootstrap_servers=secure_broker.address("SASL_SSL"),
                    security_protocol="SASL_SSL", sasl_mechanism=mechanism,
                    sasl_plain_username="alice", sasl_plain_password=password,
                    ssl_cafile=secure_broker.pki.path("ca.pem"))
    topic, values = _topic("kafka-python"), _values("kp")
    producer = kafka.KafkaProducer(**settings)
    for value in values:
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, auto_offset_reset="earliest",
                                   consumer_timeout_ms=15000, **settings)
    got = [m.value for _, m in zip(values, consumer)]
    consumer.close()
    assert got == values


# ---------------------------------------------------------------------------------- aiokafka
def test_aiokafka_sasl_ssl_scram(secure_broker):
    import aiokafka
    from aiokafka.helpers import create_ssl_context
    topic, values = _topic("aiokafka"), _values("aio")

    async def run():
        settings = dict(bootstrap_servers=secure_broker.address("SASL_SSL"),
                        security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                        sasl_plain_username="bob", sasl_plain_password=SCRAM_USERS["bob"],
                        ssl_context=create_ssl_context(cafile=secure_broker.pki.path("ca.pem")))
        producer = aiokafka.AIOKafkaProducer(**settings)
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, auto_offset_reset="earliest", **settings)
        await consumer.start()
        got = []
        try:
            while len(got) < len(values):
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got += [m.value for messages in batch.values() for m in messages]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == values


def test_aiokafka_mtls(secure_broker):
    import aiokafka
    pki = secure_broker.pki
    topic, values = _topic("aiokafka-mtls"), _values("aio-mtls", 3)

    async def run():
        context = ssl.create_default_context(cafile=pki.path("ca.pem"))
        context.load_cert_chain(pki.path("client-cert.pem"), pki.path("client-key.pem"))
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=secure_broker.address("MTLS"),
                                             security_protocol="SSL", ssl_context=context)
        await producer.start()
        try:
            return [await producer.send_and_wait(topic, v) for v in values]
        finally:
            await producer.stop()

    assert [m.offset for m in asyncio.run(run())] == [0, 1, 2]


# ----------------------------------------------------------------------------------- KafkaJS
def test_kafkajs_sasl_ssl_scram(secure_broker):
    from odradek_compat.clients import kafkajs
    if kafkajs.missing():
        pytest.skip(kafkajs.missing())
    with open(secure_broker.pki.path("ca.pem")) as handle:
        ca = handle.read()
    client = kafkajs.KafkaJsClient(secure_broker.address("SASL_SSL"), security={
        "ssl": {"ca": [ca], "servername": "localhost"},
        "sasl": {"mechanism": "scram-sha-512", "username": "alice",
                 "password": SCRAM_USERS["alice"]}})
    try:
        topic = _topic("kafkajs")
        client.create_topic(topic, 1)   # the admin client over SASL_SSL too
        records = [Rec(key=b"k%d" % i, value=v) for i, v in enumerate(_values("js", 5))]
        deliveries = client.produce(topic, records, timeout=60)
        assert all(d.error is None for d in deliveries)
        got = client.consume(topic, timeout=30)
        assert [r.content() for r in got] == [r.content() for r in records]
    finally:
        client.close()


# -------------------------------------------------------------------------------------- Java
@pytest.mark.parametrize("listener", ["SASL_SSL", "MTLS", "SASL_PLAINTEXT"])
def test_java_client(secure_broker, tmp_path, listener):
    from odradek_compat.clients import java
    if java.jars_missing("java-4"):
        pytest.skip(java.jars_missing("java-4"))
    pki = secure_broker.pki
    extra: list[str] = []
    if listener == "SASL_SSL":
        properties = {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                f'username="alice" password="{SCRAM_USERS["alice"]}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem")}
    elif listener == "SASL_PLAINTEXT":   # OAUTHBEARER with Kafka's unsecured development tokens
        import glob
        # kafka-clients' OAUTHBEARER login needs Jackson, which compat-tests/setup.sh does not
        # fetch; the reference Kafka's libs have it
        extra = glob.glob("/work/shared/apache-kafka/libs/jackson-*.jar")
        if not any("jackson-databind" in jar for jar in extra):
            pytest.skip("kafka-clients' OAUTHBEARER login needs jackson-databind (not found)")
        properties = {
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                'required unsecuredLoginStringClaim_sub="java-user";'}
    else:   # mTLS with a PKCS12 key store (Java ignores PKCS12 trust entries made outside Java,
            # which lack its trusted-certificate attribute, so the trust store is PEM)
        properties = {
            "security.protocol": "SSL", "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": pki.path("client.p12"), "ssl.keystore.password": "storepass",
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem")}
    path = tmp_path / "client.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    client = java.JavaClient(secure_broker.address(listener), "java-4", str(path),
                             extra_classpath=extra)
    try:
        topic = _topic(f"java-{listener}".lower())
        client.create_topic(topic, 1)
        records = [Rec(key=b"k%d" % i, value=v) for i, v in enumerate(_values("java", 5))]
        deliveries = client.produce(topic, records, timeout=90)
        assert all(d.error is None for d in deliveries), deliveries
        got = client.consume(topic, timeout=60)
        assert [r.content() for r in got] == [r.content() for r in records]
    finally:
        client.close()
