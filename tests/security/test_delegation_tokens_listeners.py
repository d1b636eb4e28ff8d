"""Which connections may manage delegation tokens (the shared secure broker, which has no
delegation.token.secret.key): TLS only with a client certificate, SASL unless logged in with a
token, never PLAINTEXT; past that check a broker without a secret key answers
DELEGATION_TOKEN_AUTH_DISABLED (the controller's errors carry 0 timestamps), as Kafka 3.9 does."""

from __future__ import annotations

from protocol import ErrorCode as E, messages as m

from broker.admin.client import KafkaClient
from broker.security.client import ClientSecurity
from tests.security.conftest import SCRAM_USERS

CR = m.CreateDelegationTokenRequest


def _ask(address, security, api_key, body):
    with KafkaClient(address, security=security) as client:
        return client.any_broker().request(api_key, body)[1]


def _describe_error(address, security) -> int:
    return _ask(address, security, 41, m.DescribeDelegationTokenRequest(owners=None)).error_code


def test_who_may_manage_tokens(secure_broker):
    pki = secure_broker.pki
    trust = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": pki.path("ca.pem")}
    certified = {**trust, "ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("client.p12"),
                 "ssl.keystore.password": "storepass"}
    scram = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice", "sasl.password": SCRAM_USERS["alice"]})
    assert _describe_error(secure_broker.address("PLAINTEXT"), None) == \
        E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert _describe_error(secure_broker.address("SSL"), ClientSecurity.from_properties(trust)) == \
        E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED          # one-way TLS: anonymous
    assert _describe_error(secure_broker.address("SSL"), ClientSecurity.from_properties(certified)) == \
        E.DELEGATION_TOKEN_AUTH_DISABLED
    assert _describe_error(secure_broker.address("SASL_PLAINTEXT"), scram) == \
        E.DELEGATION_TOKEN_AUTH_DISABLED
    created = _ask(secure_broker.address("SASL_PLAINTEXT"), scram, 38, CR(
        owner_principal_type=None, owner_principal_name=None, renewers=[], max_lifetime_ms=-1))
    assert (created.error_code, created.principal_name, created.issue_timestamp_ms,
            created.max_timestamp_ms) == (E.DELEGATION_TOKEN_AUTH_DISABLED, "alice", 0, 0)
    for api_key, body in ((39, m.RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=-1)),
                          (40, m.ExpireDelegationTokenRequest(hmac=b"x", expiry_time_period_ms=-1))):
        answer = _ask(secure_broker.address("SASL_PLAINTEXT"), scram, api_key, body)
        assert (answer.error_code, answer.expiry_timestamp_ms) == (E.DELEGATION_TOKEN_AUTH_DISABLED, 0)
