"""Apache Kafka with the same three listeners as bench.security's Odradek (PLAINTEXT, SSL, SASL_SSL
with SCRAM-SHA-256), so that ``python -m bench.security --kafka`` reports Kafka's own TLS/PLAINTEXT
ratios next to Odradek's, on the same machine, clients and rounds.

Kafka gets the run's certificates as a PEM key store (key + chain in one file, Kafka's
``ssl.keystore.type=PEM``) and otherwise Kafka's defaults: protocols, cipher suites and their order
are the JVM's (TLS 1.3, TLS_AES_256_GCM_SHA384 with librdkafka on this machine).
"""

from __future__ import annotations

import os
import subprocess
import time

from bench.kafka import available, kafka_home, jvm_settings
from bench.targets import free_port

STARTUP_TIMEOUT_S = 120.0   # a JVM on a loaded 2-core machine


def start_kafka(directory: str, pki) -> tuple[subprocess.Popen, dict[str, int]]:
    """A fresh single-node Kafka 3.9 (run.sh) with PLAINTEXT, SSL and SASL_SSL listeners."""
    reason = available()
    if reason:
        raise RuntimeError(f"Apache Kafka is not available: {reason}")
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_SSL", "CONTROLLER")}
    client_listeners = ",".join(f"{name}://127.0.0.1:{ports[name]}"
                                for name in ("PLAINTEXT", "SSL", "SASL_SSL"))
    properties = {   # appended after run.sh's own lines: these win
        "listeners": f"{client_listeners},CONTROLLER://127.0.0.1:{ports['CONTROLLER']}",
        "advertised.listeners": client_listeners,
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "log.segment.delete.delay.ms": "0",
    }
    data = os.path.join(directory, "data")
    os.makedirs(data)
    with open(os.path.join(data, "extra.properties"), "w") as handle:
        handle.writelines(f"{key}={value}\n" for key, value in properties.items())
    log_path = os.path.join(directory, "kafka.log")
    env = {key: value for key, value in os.environ.items() if key != "KAFKA_EXTRA_PROPS"}
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(kafka_home() / "run.sh"), str(ports["PLAINTEXT"]), data,
                                    str(ports["CONTROLLER"])], stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        with open(log_path, errors="replace") as handle:
            if "Kafka Server started" in handle.read():
                del ports["CONTROLLER"]
                return process, ports
        if process.poll() is not None:
            break
        time.sleep(0.3)
    process.kill()
    process.wait(30)
    with open(log_path, errors="replace") as handle:
        raise RuntimeError("Apache Kafka did not start: " + handle.read()[-2000:])


def describe(process: subprocess.Popen) -> str:
    jvm = jvm_settings(process.pid)
    return f"Apache Kafka ({kafka_home()}), heap {jvm['heap']}, {jvm['gc']}"
