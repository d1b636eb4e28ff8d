"""Delegation tokens piece by piece: the metadata image, the controller's decisions, the SCRAM login
with a token, and the Envelope that carries a forwarded request's principal."""

from __future__ import annotations

import base64

import pytest

from protocol import ErrorCode as E, messages as m

from broker.cluster import token_wire
from broker.controller import delegation_tokens as decide
from broker.controller import records as r
from broker.controller.image import MetadataImage
from broker.security.delegation_tokens import TokenCredentials, TokenInfo, token_hmac
from broker.security.principal import KafkaPrincipal
from broker.security.sasl import AuthenticationFailed
from broker.security.sasl.scram import ScramClient, ScramServer

ALICE, BOB, CAROL = (KafkaPrincipal.user(n) for n in ("alice", "bob", "carol"))
SETTINGS = decide.TokenSettings(secret_key="k", max_lifetime_ms=10_000, renew_lifetime_ms=1_000)
NOW = 1_000_000


def created_image(now=NOW, **kwargs):
    records, created = decide.create(MetadataImage(), SETTINGS, now, ALICE, CAROL, [BOB],
                                     kwargs.get("max_lifetime_ms", -1))
    return MetadataImage().apply(records), created


def test_the_image_keeps_tokens_and_a_snapshot_rebuilds_them():
    image, created = created_image()
    token = image.delegation_tokens[created.token.token_id]
    assert token == created.token
    assert (token.owner, token.requester, token.renewers) == (ALICE, CAROL, (BOB,))
    rebuilt = MetadataImage().apply(r.decode_records(r.encode_records(image.to_records())))
    assert rebuilt.delegation_tokens == image.delegation_tokens
    gone = image.apply([r.RemoveDelegationTokenRecord(token_id=token.token_id)])
    assert gone.delegation_tokens == {}


def test_create_takes_the_default_lifetimes_capped_by_the_request():
    _, created = created_image()
    token = created.token
    assert (token.issue_timestamp, token.expiry_timestamp, token.max_timestamp) == \
        (NOW, NOW + 1_000, NOW + 10_000)
    assert created.hmac == token_hmac("k", token.token_id)
    _, short = created_image(max_lifetime_ms=500)
    assert short.token.expiry_timestamp == short.token.max_timestamp == NOW + 500
    records, disabled = decide.create(MetadataImage(), decide.TokenSettings(), NOW, ALICE, ALICE,
                                      [], -1)
    assert (records, disabled.error_code) == ([], E.DELEGATION_TOKEN_AUTH_DISABLED)


def test_renew_and_expire():
    image, created = created_image()
    hmac = created.hmac
    assert decide.renew(image, SETTINGS, NOW, CAROL, hmac, -1)[1] == \
        (E.DELEGATION_TOKEN_OWNER_MISMATCH, 0)   # the requester is not a renewer
    assert decide.renew(image, SETTINGS, NOW, ALICE, b"other", -1)[1] == \
        (E.DELEGATION_TOKEN_NOT_FOUND, 0)
    records, answer = decide.renew(image, SETTINGS, NOW + 500, BOB, hmac, 5_000)
    assert answer == (0, NOW + 1_500)             # no longer than delegation.token.expiry.time.ms
    assert records[0].expiration_timestamp == NOW + 1_500
    renewed = image.apply(records)
    assert decide.renew(renewed, SETTINGS, NOW + 9_500, BOB, hmac, -1)[1] == \
        (E.DELEGATION_TOKEN_EXPIRED, 0)
    assert decide.expire(image, SETTINGS, NOW, BOB, hmac, 60_000)[1] == (0, NOW + 10_000)  # max
    short, created_short = created_image(max_lifetime_ms=1_500)
    assert decide.renew(short, SETTINGS, NOW + 900, ALICE, created_short.hmac, -1)[1] == \
        (0, NOW + 1_500)                           # a renewal stops at the max lifetime
    assert decide.renew(image, SETTINGS, NOW + 1_001, ALICE, hmac, -1)[1] == \
        (E.DELEGATION_TOKEN_EXPIRED, 0)
    records, answer = decide.expire(image, SETTINGS, NOW, ALICE, hmac, 200)
    assert answer == (0, NOW + 200) and isinstance(records[0], r.DelegationTokenRecord)
    records, answer = decide.expire(image, SETTINGS, NOW + 5_000, ALICE, hmac, -1)   # expired too
    assert answer == (0, NOW + 4_999)
    assert records == [r.RemoveDelegationTokenRecord(token_id=created.token.token_id)]


def test_the_sweep_removes_only_expired_tokens():
    image, created = created_image()
    assert decide.sweep(image, NOW + 1_000) == []
    assert decide.sweep(image, NOW + 1_001) == [
        r.RemoveDelegationTokenRecord(token_id=created.token.token_id)]


def _login(server: ScramServer, client: ScramClient) -> None:
    final = server.evaluate(client.first_message())
    client.verify_server_final(server.evaluate(client.final_message(final)))


def test_scram_login_with_a_token_is_the_owner():
    image, created = created_image()
    credentials = TokenCredentials("k")
    token_id = created.token.token_id

    def token_lookup(name, mechanism):
        found = credentials.lookup(image.delegation_tokens, name, mechanism)
        return found and (found[0].owner.name, found[1], found[0].expiry_timestamp)

    server = ScramServer("SCRAM-SHA-512", lambda user, mechanism: None, token_lookup)
    password = base64.b64encode(created.hmac).decode()
    _login(server, ScramClient("SCRAM-SHA-512", token_id, password, token_auth=True))
    assert (server.principal_name, server.token_authenticated, server.credential_expiry_ms) == \
        ("alice", True, NOW + 1_000)
    # without tokenauth the token id is looked up as a user (there is none)
    plain = ScramServer("SCRAM-SHA-512", lambda user, mechanism: None, token_lookup)
    with pytest.raises(AuthenticationFailed):
        _login(plain, ScramClient("SCRAM-SHA-512", token_id, password))
    wrong = ScramServer("SCRAM-SHA-512", lambda user, mechanism: None, token_lookup)
    with pytest.raises(AuthenticationFailed):
        _login(wrong, ScramClient("SCRAM-SHA-512", token_id, "d3Jvbmc=", token_auth=True))
    # a secret key of its own gives other HMACs: nothing matches
    assert TokenCredentials(None).lookup(image.delegation_tokens, token_id, "SCRAM-SHA-256") is None


def test_a_forwarded_request_carries_its_principal():
    principal = KafkaPrincipal("User", "alice", token_authenticated=True)
    body = m.RenewDelegationTokenRequest(hmac=b"h", renew_period_ms=5)
    header, inner, carried = token_wire.open_envelope(
        token_wire.envelope(token_wire.RENEW, body, principal, "127.0.0.1"))
    assert (header.api_key, inner.hmac, inner.renew_period_ms) == (39, b"h", 5)
    assert carried == principal and carried.token_authenticated
    answer = m.RenewDelegationTokenResponse(error_code=0, expiry_timestamp_ms=42)
    opened = token_wire.open_envelope_response(
        token_wire.RENEW, token_wire.envelope_response(header, answer))
    assert opened.expiry_timestamp_ms == 42


def test_equal_principals_whatever_the_login():
    assert KafkaPrincipal.user("alice", token_authenticated=True) == ALICE
    assert TokenInfo("t", ALICE, CAROL, (BOB,), 0, 0, 0).owner_or_renewer(
        KafkaPrincipal.user("bob", token_authenticated=True))


def test_the_old_name_of_the_secret_key_is_read(tmp_path):
    from broker.security.delegation_tokens import token_secret_key
    from broker.testing import make_config
    assert token_secret_key(make_config(tmp_path)) is None
    assert token_secret_key(make_config(tmp_path, {"delegation.token.master.key": "old"})) == "old"
    both = {"delegation.token.master.key": "old", "delegation.token.secret.key": "new"}
    assert token_secret_key(make_config(tmp_path, both)) == "new"


def test_the_controller_listener_takes_token_logins(tmp_path):
    from types import SimpleNamespace

    from broker.config import BrokerConfig
    from broker.security.authenticator import SaslAuthenticator
    from broker.security.controller_listener import ControllerListenerGuard

    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'
    config = BrokerConfig({
        "process.roles": "broker,controller", "node.id": "1", "log.dirs": str(tmp_path),
        "controller.quorum.voters": "1@127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
        "listener.name.controller.scram-sha-256.sasl.jaas.config": jaas,
        "delegation.token.secret.key": "k"})
    guard = ControllerListenerGuard.for_config(config)
    image, created = created_image()
    guard.attach(SimpleNamespace(image=image))
    principals = []
    connection = SimpleNamespace(set_principal=principals.append, peer="127.0.0.1:1")
    authenticator = SaslAuthenticator(guard.security, connection, guard)
    client = ScramClient("SCRAM-SHA-256", created.token.token_id,
                         base64.b64encode(created.hmac).decode(), token_auth=True)
    assert authenticator.handshake(1, "SCRAM-SHA-256")[0].error_code == 0
    first, _ = authenticator.authenticate(2, client.first_message())
    final, _ = authenticator.authenticate(2, client.final_message(bytes(first.auth_bytes)))
    assert final.error_code == 0
    assert principals == [ALICE] and principals[0].token_authenticated
