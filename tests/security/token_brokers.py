"""Brokers for the delegation token tests: a real ``odradek serve`` and the reference Apache Kafka 3.9,
each with a PLAINTEXT listener (set-up) and a SASL_PLAINTEXT one (SCRAM-SHA-256/512) and the same
``delegation.token.secret.key``. SCRAM users are added over PLAINTEXT with AlterUserScramCredentials.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from broker.testing_cluster import free_port

SECRET = "token-test-secret"
USERS = ("alice", "bob", "carol", "admin")
TOKEN_SETTINGS = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "delegation.token.secret.key": SECRET,
}
# The StandardAuthorizer with two super users: ANONYMOUS (PLAINTEXT set-up) and admin.
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
}


@dataclass
class TokenBroker:
    plain: str    # host:port of the PLAINTEXT listener
    sasl: str     # host:port of the SASL_PLAINTEXT listener


def password(user: str) -> str:
    return f"{user}-secret"


def add_users(bootstrap: str) -> None:
    from broker.admin.client import KafkaClient
    from broker.admin.users import set_credential
    with KafkaClient(bootstrap) as client:
        for user in USERS:
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                set_credential(client, user, mechanism, password(user), 4096)


def wait_for_login(sasl: str, timeout: float = 20.0) -> None:
    """Kafka's brokers learn of new SCRAM users from the metadata log a moment later."""
    from broker.admin.client import KafkaClient, KafkaError
    deadline = time.monotonic() + timeout
    while True:
        try:
            with KafkaClient(sasl, security=scram_security("alice")) as client:
                client.any_broker()
                return
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def scram_security(user: str, secret: str | None = None, *, token: bool = False,
                   mechanism: str = "SCRAM-SHA-256"):
    from broker.security.client import ClientSecurity
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
            f'password="{secret or password(user)}"' + (' tokenauth="true"' if token else "") + ";")
    return ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT",
                                           "sasl.mechanism": mechanism, "sasl.jaas.config": jaas})


def odradek_serve(data_dir, settings: dict):
    """(ServeProcess started, TokenBroker)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
    from tests.broker.subprocess_broker import ServeProcess

    plain, sasl = free_port(), free_port()
    overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                 **TOKEN_SETTINGS, **settings}
    process = ServeProcess(data_dir, *(f"{k}={v}" for k, v in overrides.items())).start()
    return process, TokenBroker(f"127.0.0.1:{plain}", f"127.0.0.1:{sasl}")


def start_kafka(data_dir, settings: dict):
    """(ApacheKafka started, TokenBroker)."""
    from tests import apache_kafka as oracle

    kafka = oracle.ApacheKafka(data_dir)
    sasl, controller = free_port(), free_port()
    lines = {
        "listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},CONTROLLER://127.0.0.1:{controller},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT",
        # Kafka wants a JAAS entry for every SASL mechanism of a listener, even SCRAM's empty one
        **{f"listener.name.sasl_plaintext.{m}.sasl.jaas.config":
           "org.apache.kafka.common.security.scram.ScramLoginModule required;"
           for m in ("scram-sha-256", "scram-sha-512")},
        **TOKEN_SETTINGS, **settings,
    }
    (data_dir / "data").mkdir()
    (data_dir / "data" / "extra.properties").write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    kafka.start()
    return kafka, TokenBroker(kafka.bootstrap, f"127.0.0.1:{sasl}")


def serve_with_users(kind: str, data_dir, settings: dict):
    """A started broker of `kind` ("odradek" or "kafka", the oracle) with this module's SCRAM users
    able to log in: yields its TokenBroker, stops it afterwards (a fixture's body)."""
    import pytest

    if kind == "kafka":
        from tests import apache_kafka as oracle
        if oracle.skip_reason():
            pytest.skip(oracle.skip_reason())
        process, broker = start_kafka(data_dir, settings)
    else:
        process, broker = odradek_serve(data_dir, settings)
    try:
        add_users(broker.plain)
        wait_for_login(broker.sasl)
        yield broker
    finally:
        process.stop()
