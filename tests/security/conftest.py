"""A broker with every security protocol and mechanism, shared by the security tests.

Listeners: PLAINTEXT (set-up), SSL (client certificates requested, mapped by rule), SASL_PLAINTEXT and
SASL_SSL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER against a JWKS file), MTLS (client certificate
required, PKCS12 key store), and three TLS listeners with bad server certificates (expired, another
CA, another host name) set through per-listener overrides. SCRAM users alice and bob exist.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from broker.security.pki import make_pki  # noqa: E402
from tokens import TokenIssuer  # noqa: E402

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USERS = {"alice": "alice-scram", "bob": "bob-scram"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              'username="admin" password="admin-secret" '
              + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";")


@dataclass
class SecureBroker:
    running: object
    pki: object
    issuer: TokenIssuer
    ports: dict
    config: dict    # the server settings it runs with (secure_config)

    @property
    def broker(self):
        return self.running.broker

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def principals(self) -> set[str]:
        return {str(c.principal) for c in list(self.broker._connections)}


def secure_config(pki, issuer, reauth_ms: int = 0) -> dict:
    listeners = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "MTLS", "EXPIRED", "WRONGCA",
                 "WRONGHOST"]
    config = {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in listeners),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,MTLS:SSL,EXPIRED:SSL,WRONGCA:SSL,"
                                          "WRONGHOST:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.path("server.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.path("ca.pem"),
        "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers,.*$/$1/L,DEFAULT",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.keystore.type": "PKCS12",
        "listener.name.mtls.ssl.keystore.location": pki.path("server.p12"),
        "listener.name.mtls.ssl.keystore.password": "storepass",
        "listener.name.mtls.ssl.truststore.type": "PKCS12",
        "listener.name.mtls.ssl.truststore.location": pki.path("truststore.p12"),
        "listener.name.mtls.ssl.truststore.password": "storepass",
        "listener.name.expired.ssl.keystore.location": pki.path("server-expired.pem"),
        "listener.name.wrongca.ssl.keystore.location": pki.path("server-wrong-ca.pem"),
        "listener.name.wronghost.ssl.keystore.location": pki.path("server-wrong-host.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":
            "file://" + issuer.jwks_path,
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.audience": "odradek",
        "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.issuer": issuer.issuer,
        "offsets.topic.num.partitions": "1",
    }
    if reauth_ms:
        config["connections.max.reauth.ms"] = str(reauth_ms)
    return config


def add_scram_users(bootstrap: str) -> None:
    from broker.admin.client import KafkaClient
    from broker.admin.users import set_credential
    with KafkaClient(bootstrap) as client:
        for user, password in SCRAM_USERS.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                set_credential(client, user, mechanism, password, 4096)


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def token_issuer(tmp_path_factory):
    return TokenIssuer(tmp_path_factory.mktemp("jwks"))


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory, pki, token_issuer):
    from broker.testing import running_broker
    config = secure_config(pki, token_issuer)
    with running_broker(tmp_path_factory.mktemp("secure-broker"), config) as running:
        ports = {listener.name: port for listener, port in running.broker._bound}
        add_scram_users(f"127.0.0.1:{ports['PLAINTEXT']}")
        yield SecureBroker(running, pki, token_issuer, ports, config)
