"""The SSL rows of `python -m bench`: Odradek and Apache Kafka, each with an SSL listener next to its
PLAINTEXT one, moving the same records over both in every repetition.

The bench makes its own certificate authority for the run (``cryptography``, via
`broker.security.pki.CertificateAuthority`): one server certificate for 127.0.0.1/localhost, as PEM
for Odradek and PKCS#12 for Kafka's JVM, and the CA as PEM for librdkafka, which verifies the broker's
name as it does by default. Each repetition runs the workload over PLAINTEXT and then over SSL on the
same broker, so "SSL/PLAINTEXT" is that broker's own TLS cost, measured under the same load; the
Odradek/Kafka column compares both the throughputs and those costs.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench import workloads
from bench.targets import Target

KEYSTORE_PASSWORD = "bench-storepass"
SSL_METRICS = [("PLAINTEXT records/s", True), ("SSL records/s", True), ("SSL MB/s", True),
               ("SSL/PLAINTEXT", True), ("SSL server CPU µs/record", False)]


class BenchPki:
    """A CA and one server certificate, written under `directory` for both brokers and the client."""

    def __init__(self, directory: Path):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        from broker.security.pki import CertificateAuthority

        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        ca = CertificateAuthority("Odradek Bench CA")
        server = ca.issue("bench-broker", hosts=("127.0.0.1", "localhost"))
        files = {
            "ca.pem": ca.cert_pem(),
            "server.pem": server.key_pem() + server.cert_pem() + ca.cert_pem(),  # Odradek: key + chain
            "server.p12": pkcs12.serialize_key_and_certificates(  # Kafka's JVM keystore
                b"bench-broker", server.key, server.cert, [ca.cert],
                serialization.BestAvailableEncryption(KEYSTORE_PASSWORD.encode())),
        }
        for name, data in files.items():
            (self.directory / name).write_bytes(data)

    def path(self, name: str) -> str:
        return str(self.directory / name)

    def describe(self) -> str:
        return "ECDSA P-256 certificate from a CA made for the run; TLS version and cipher as negotiated"

    def odradek_settings(self) -> dict[str, str]:
        return {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                "ssl.keystore.type": "PEM", "ssl.keystore.location": self.path("server.pem")}

    def kafka_settings(self, port: int, ssl_port: int, controller_port: int) -> dict[str, str]:
        return {"listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port},"
                             f"CONTROLLER://127.0.0.1:{controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
                "ssl.keystore.type": "PKCS12", "ssl.keystore.location": self.path("server.p12"),
                "ssl.keystore.password": KEYSTORE_PASSWORD, "ssl.key.password": KEYSTORE_PASSWORD}

    def client_settings(self) -> dict[str, str]:
        return {"security.protocol": "SSL", "ssl.ca.location": self.path("ca.pem")}


def _with_ssl(target: Target) -> Target:
    if not target.ssl_bootstrap:
        raise RuntimeError("started without an SSL listener")
    return target


def build_ssl_cases(suite) -> list:
    """Batched produce (100 B and 1 KiB, acks=1) and consume, each over PLAINTEXT then SSL."""
    from bench.suite import BATCHED, CONSUME_CONFIG, KIB, START_MARGIN_S, Case, _throughput, _with_cpu

    s = suite.settings

    def produce_case(label: str, size: int):
        def run(target: Target) -> dict[str, float]:
            _with_ssl(target)
            with suite._topic(target, f"ssl-plain-{size}", s.partitions) as topic:
                plain = suite.produce_run(target, topic, size, {**BATCHED, "acks": "1"})
            with suite._topic(target, f"ssl-{size}", s.partitions) as topic:
                secure = suite.produce_run(target, topic, size, {**BATCHED, "acks": "1", **target.ssl_client},
                                           bootstrap=target.ssl_bootstrap)
            return _ssl_values(plain, secure)

        return Case(f"SSL: produce batched {label} acks=1 (PLAINTEXT then SSL, same broker)", run, SSL_METRICS,
                    targets=("odradek", "kafka"))

    filled: dict[str, tuple[str, dict[int, int]]] = {}

    def prepare(target: Target) -> None:
        _with_ssl(target)
        filled[target.name] = suite.prefilled_topic(target, "ssl-consume", KIB, s.consume_records)

    def consume(target: Target, bootstrap: str, client: dict) -> dict[str, float]:
        topic, expected = filled[target.name]
        consumers = max(1, min(s.producers, len(expected)))
        shares = [dict(list(expected.items())[i::consumers]) for i in range(consumers)]
        start_at = time.time() + START_MARGIN_S
        config = {**CONSUME_CONFIG, **client}
        calls = [(workloads.consume, (bootstrap, topic, share, KIB, start_at, 120, config)) for share in shares]
        cpu_before = target.cpu_seconds()
        results = suite._gather(calls, timeout=200)
        return _with_cpu(_throughput(results), target, cpu_before, results)

    def run_consume(target: Target) -> dict[str, float]:
        plain = consume(target, target.bootstrap, {})
        secure = consume(target, target.ssl_bootstrap, target.ssl_client)
        return _ssl_values(plain, secure)

    def finish(target: Target) -> None:
        suite.delete_topic(target, filled.pop(target.name)[0])

    return [produce_case("100 B", 100), produce_case("1 KiB", KIB),
            Case(f"SSL: consume from earliest, 1 KiB ({s.consume_records:,} records; PLAINTEXT then SSL)",
                 run_consume, SSL_METRICS, targets=("odradek", "kafka"), prepare=prepare, finish=finish)]


def _ssl_values(plain: dict[str, float], secure: dict[str, float]) -> dict[str, float]:
    from bench.suite import CPU_METRIC

    values = {"PLAINTEXT records/s": plain["records/s"], "SSL records/s": secure["records/s"],
              "SSL MB/s": secure["MB/s"], "SSL/PLAINTEXT": secure["records/s"] / plain["records/s"]}
    if CPU_METRIC in secure:
        values["SSL server CPU µs/record"] = secure[CPU_METRIC]
    return values
