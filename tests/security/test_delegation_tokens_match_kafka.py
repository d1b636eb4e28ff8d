"""Create/Renew/Expire/DescribeDelegationToken and logging in with a token (SCRAM, tokenauth=true),
over the wire against a real ``odradek serve`` and against the reference Apache Kafka 3.9 (-m slow),
each with the StandardAuthorizer (super users ANONYMOUS and admin). The expected answers are Kafka's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest

from protocol import ErrorCode as E, messages as m

from broker.admin.client import KafkaClient, KafkaError
from broker.security.sasl.scram import ScramClient
from tests.broker.raw_client import RawClient
from tests.security.token_brokers import AUTHORIZER, SECRET, scram_security, serve_with_users

DAY_MS, WEEK_MS = 86_400_000, 604_800_000
CR = m.CreateDelegationTokenRequest


@pytest.fixture(scope="module", params=["odradek", pytest.param("kafka", marks=pytest.mark.slow)])
def target(request, tmp_path_factory):
    yield from serve_with_users(request.param, tmp_path_factory.mktemp(f"tokens-{request.param}"),
                                AUTHORIZER)


def ask(address: str, security, api_key: int, body, max_version: int | None = None):
    with KafkaClient(address, security=security) as client:
        return client.any_broker().request(api_key, body, max_version=max_version)[1]


def create(target, user="alice", renewers=(), owner=None, max_lifetime_ms=-1):
    return ask(target.sasl, scram_security(user), 38, CR(
        owner_principal_type=owner and "User", owner_principal_name=owner,
        renewers=[CR.CreatableRenewers(principal_type=t, principal_name=n) for t, n in renewers],
        max_lifetime_ms=max_lifetime_ms))


def renew(target, user, token_hmac, period=-1):
    return ask(target.sasl, scram_security(user), 39,
               m.RenewDelegationTokenRequest(hmac=token_hmac, renew_period_ms=period))


def expire(target, user, token_hmac, period=-1):
    return ask(target.sasl, scram_security(user), 40,
               m.ExpireDelegationTokenRequest(hmac=token_hmac, expiry_time_period_ms=period))


def described(target, user, owners=None, *, present=(), absent=()):
    """The token ids `user` is shown; waits up to 10 s for `present` to show and `absent` to go
    (Kafka's brokers learn of a change from the metadata log a moment after the controller)."""
    Owner = m.DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
    request = m.DescribeDelegationTokenRequest(owners=None if owners is None else [
        Owner(principal_type="User", principal_name=o) for o in owners])
    deadline = time.monotonic() + 10
    while True:
        response = ask(target.sasl, scram_security(user), 41, request)
        assert response.error_code == 0
        ids = {t.token_id: t for t in response.tokens}
        if (set(present) <= set(ids) and not set(absent) & set(ids)) or time.monotonic() > deadline:
            return ids
        time.sleep(0.1)


def token_security(created, secret=None, token=True, mechanism="SCRAM-SHA-256"):
    password = secret or base64.b64encode(bytes(created.hmac)).decode()
    return scram_security(created.token_id, password, token=token, mechanism=mechanism)


def test_unauthenticated_connections_may_not_manage_tokens(target):
    created = ask(target.plain, None, 38, CR(owner_principal_type=None, owner_principal_name=None,
                                              renewers=[], max_lifetime_ms=-1))
    assert (created.error_code, created.principal_name, created.token_requester_principal_name,
            created.issue_timestamp_ms, created.expiry_timestamp_ms, created.max_timestamp_ms,
            created.token_id) == (E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "ANONYMOUS", "ANONYMOUS",
                                  -1, -1, -1, "")
    described_ = ask(target.plain, None, 41, m.DescribeDelegationTokenRequest(owners=None))
    assert (described_.error_code, described_.tokens) == (E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
    renewed = ask(target.plain, None, 39, m.RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=1))
    assert (renewed.error_code, renewed.expiry_timestamp_ms) == (E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)


def test_create_answers_the_token_and_its_hmac(target):
    created = create(target, renewers=[("User", "bob")])
    assert created.error_code == 0
    assert (created.principal_type, created.principal_name) == ("User", "alice")
    assert created.token_requester_principal_name == "alice"
    assert created.expiry_timestamp_ms - created.issue_timestamp_ms == DAY_MS
    assert created.max_timestamp_ms - created.issue_timestamp_ms == WEEK_MS
    assert len(created.token_id) == 22
    assert bytes(created.hmac) == hmac.new(SECRET.encode(), created.token_id.encode(),
                                           hashlib.sha512).digest()
    short = create(target, max_lifetime_ms=1000)
    assert short.expiry_timestamp_ms == short.max_timestamp_ms == short.issue_timestamp_ms + 1000


def test_create_refusals(target):
    group = create(target, renewers=[("Group", "ops")])
    assert (group.error_code, group.issue_timestamp_ms, group.token_id) == (E.INVALID_PRINCIPAL_TYPE, -1, "")
    for_carol = create(target, owner="carol")   # alice has no CreateTokens on User:carol
    assert (for_carol.error_code, for_carol.principal_name, for_carol.token_requester_principal_name,
            for_carol.max_timestamp_ms) == (E.DELEGATION_TOKEN_AUTHORIZATION_FAILED, "carol", "alice", -1)
    by_admin = create(target, user="admin", owner="carol")
    assert (by_admin.error_code, by_admin.principal_name,
            by_admin.token_requester_principal_name) == (0, "carol", "admin")
    assert described(target, "carol", present=[by_admin.token_id])[by_admin.token_id] \
        .token_requester_principal_name == "admin"
    # v0-v2 have no owner field: the token is the requester's
    v2 = ask(target.sasl, scram_security("bob"), 38, CR(renewers=[], max_lifetime_ms=-1), max_version=2)
    assert (v2.error_code, v2.principal_name) == (0, "bob")
    described(target, "bob", present=[v2.token_id])
    old = ask(target.sasl, scram_security("bob"), 41, m.DescribeDelegationTokenRequest(owners=None),
              max_version=2)   # v0-v2 have no requester fields
    assert v2.token_id in {t.token_id for t in old.tokens}


def test_describe_shows_own_renewable_and_permitted_tokens(target):
    mine = create(target, renewers=[("User", "bob")])
    private = create(target)
    ids = {mine.token_id, private.token_id}
    alice_sees = described(target, "alice", present=ids)
    assert ids <= set(alice_sees)
    assert [(r.principal_type, r.principal_name) for r in alice_sees[mine.token_id].renewers] == \
        [("User", "bob")]
    assert bytes(alice_sees[mine.token_id].hmac) == bytes(mine.hmac)
    bob_sees = described(target, "bob", present=[mine.token_id])
    assert mine.token_id in bob_sees and private.token_id not in bob_sees
    assert not ids & set(described(target, "carol", owners=["alice"]))
    assert ids <= set(described(target, "admin", present=ids))   # a super user sees all
    assert described(target, "alice", owners=[]) == {}


def test_renew_by_owner_or_renewer_within_the_max_lifetime(target):
    token = create(target, renewers=[("User", "bob")], max_lifetime_ms=30_000)
    described(target, "alice", present=[token.token_id])
    token_hmac = bytes(token.hmac)
    assert renew(target, "carol", token_hmac).error_code == E.DELEGATION_TOKEN_OWNER_MISMATCH
    before = int(time.time() * 1000)
    by_bob = renew(target, "bob", token_hmac, 5000)
    assert by_bob.error_code == 0 and abs(by_bob.expiry_timestamp_ms - before - 5000) < 3000
    capped = renew(target, "alice", token_hmac)   # the default period, capped at the max lifetime
    assert (capped.error_code, capped.expiry_timestamp_ms) == (0, token.max_timestamp_ms)
    unknown = renew(target, "alice", b"no such token")
    assert (unknown.error_code, unknown.expiry_timestamp_ms) == (E.DELEGATION_TOKEN_NOT_FOUND, 0)
    for_carol = create(target, user="admin", owner="carol")
    described(target, "admin", present=[for_carol.token_id])
    # the requester is neither owner nor renewer
    assert renew(target, "admin", bytes(for_carol.hmac)).error_code == E.DELEGATION_TOKEN_OWNER_MISMATCH


def test_expire_then_renewal_fails_and_negative_period_removes(target):
    token = create(target, renewers=[("User", "bob")])
    described(target, "alice", present=[token.token_id])
    token_hmac = bytes(token.hmac)
    assert expire(target, "carol", token_hmac).error_code == E.DELEGATION_TOKEN_OWNER_MISMATCH
    before = int(time.time() * 1000)
    later = expire(target, "bob", token_hmac, 100_000)
    assert later.error_code == 0 and abs(later.expiry_timestamp_ms - before - 100_000) < 3000
    assert expire(target, "alice", token_hmac, 1).error_code == 0
    time.sleep(0.3)
    expired = renew(target, "alice", token_hmac)
    assert (expired.error_code, expired.expiry_timestamp_ms) == (E.DELEGATION_TOKEN_EXPIRED, 0)
    # still listed until removed: a negative period removes it at once, expired or not
    assert expire(target, "alice", token_hmac, -1).error_code == 0
    assert token.token_id not in described(target, "alice", absent=[token.token_id])
    assert expire(target, "alice", token_hmac).error_code == E.DELEGATION_TOKEN_NOT_FOUND


def test_logging_in_with_a_token(target):
    token = create(target, renewers=[("User", "bob")])
    described(target, "alice", present=[token.token_id])
    with KafkaClient(target.sasl, security=token_security(token)) as client:
        connection = client.any_broker()
        assert client.metadata().brokers
        # a token session is the owner's, and may not manage tokens
        _, again = connection.request(38, CR(owner_principal_type=None, owner_principal_name=None,
                                             renewers=[], max_lifetime_ms=-1))
        assert (again.error_code, again.principal_name) == (E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "alice")
        _, listing = connection.request(41, m.DescribeDelegationTokenRequest(owners=None))
        assert listing.error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    with KafkaClient(target.sasl, security=token_security(token, mechanism="SCRAM-SHA-512")) as client:
        assert client.metadata().brokers
    refused = [token_security(token, secret="d3Jvbmc="),       # a wrong HMAC
               token_security(token, token=False)]            # no tokenauth: not a user
    for security in refused:
        with pytest.raises(KafkaError, match="SASL_AUTHENTICATION_FAILED"):
            with KafkaClient(target.sasl, security=security) as client:
                client.any_broker()
    assert expire(target, "alice", bytes(token.hmac)).error_code == 0
    described(target, "alice", absent=[token.token_id])
    with pytest.raises(KafkaError, match="SASL_AUTHENTICATION_FAILED"):
        with KafkaClient(target.sasl, security=token_security(token)) as client:
            client.any_broker()


def allow(target, principal: str, resource_type: int, name: str, operation: int) -> None:
    C = m.CreateAclsRequest
    answer = ask(target.plain, None, 30, C(creations=[C.AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=3,   # LITERAL
        principal=principal, host="*", operation=operation, permission_type=3)]))   # ALLOW
    assert answer.results[0].error_code == 0


def test_acls_let_a_user_create_for_another_and_describe_others_tokens(target):
    USER, TOKEN, DESCRIBE, CREATE_TOKENS, DESCRIBE_TOKENS = 7, 6, 8, 13, 14
    allow(target, "User:bob", USER, "User:carol", CREATE_TOKENS)
    deadline = time.monotonic() + 10
    while (for_carol := create(target, user="bob", owner="carol")).error_code:   # ACLs propagate
        assert for_carol.error_code == E.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert (for_carol.principal_name, for_carol.token_requester_principal_name) == ("carol", "bob")
    # the requester sees the token it asked for, but may not renew it
    assert for_carol.token_id in described(target, "bob", present=[for_carol.token_id])
    assert renew(target, "bob", bytes(for_carol.hmac)).error_code == E.DELEGATION_TOKEN_OWNER_MISMATCH
    by_owner, by_id, hidden = create(target), create(target, user="bob"), create(target, user="bob")
    allow(target, "User:carol", USER, "User:alice", DESCRIBE_TOKENS)   # every token alice owns
    allow(target, "User:carol", TOKEN, by_id.token_id, DESCRIBE)   # this one of bob's
    seen = described(target, "carol", present=[by_owner.token_id, by_id.token_id])
    assert {by_owner.token_id, by_id.token_id} <= set(seen) and hidden.token_id not in seen


def test_a_token_session_ends_when_the_token_expires(target):
    """KIP-368: without connections.max.reauth.ms too, SaslAuthenticate v1+ tells the client its
    session lasts until the token's expiry."""
    token = create(target, max_lifetime_ms=60_000)
    described(target, "alice", present=[token.token_id])
    host, port = target.sasl.split(":")
    client = ScramClient("SCRAM-SHA-256", token.token_id,
                         base64.b64encode(bytes(token.hmac)).decode(), token_auth=True)
    with RawClient(host, int(port)) as wire:
        assert wire.request(17, 1, m.SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == 0
        first = wire.request(36, 2, m.SaslAuthenticateRequest(auth_bytes=client.first_message()))
        final = wire.request(36, 2, m.SaslAuthenticateRequest(
            auth_bytes=client.final_message(bytes(first.auth_bytes))))
        left_ms = token.expiry_timestamp_ms - int(time.time() * 1000)
        assert final.error_code == 0 and abs(final.session_lifetime_ms - left_ms) < 3000
