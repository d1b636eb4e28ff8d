"""``odradek tokens create|renew|expire|describe``: delegation tokens (KIP-48), with the options of
Kafka's ``kafka-delegation-tokens``. Brokers refuse these requests over PLAINTEXT, TLS without a
client certificate and token sessions, so ``--command-config`` names a SASL or mTLS login.
The HMAC is shown and taken in base64, as a client's SCRAM password for the token."""

from __future__ import annotations

import argparse
import base64
import binascii
from datetime import datetime, timezone

from protocol import messages

from broker.admin.client import KafkaClient, check
from broker.admin.common import runs
from broker.admin.output import emit_json, info, table
from broker.security.principal import KafkaPrincipal

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41


def create_token(client: KafkaClient, renewers=(), owner: str | None = None,
                 max_lifetime_ms: int = -1) -> dict:
    R = messages.CreateDelegationTokenRequest
    owner_principal = _principal(owner) if owner else None
    renewer_principals = [_principal(p) for p in renewers]

    def body(version):
        request = R(renewers=[R.CreatableRenewers(principal_type=p.principal_type,
                                                  principal_name=p.name)
                              for p in renewer_principals], max_lifetime_ms=max_lifetime_ms)
        if version >= 3:
            request.owner_principal_type = owner_principal and owner_principal.principal_type
            request.owner_principal_name = owner_principal and owner_principal.name
        elif owner_principal:
            raise ValueError("--owner-principal needs a broker with CreateDelegationToken v3")
        return request

    _, response = client.any_broker().request(CREATE, body)
    check(response.error_code, None, "create delegation token")
    return {"token_id": response.token_id, "hmac": base64.b64encode(response.hmac).decode(),
            "owner": f"{response.principal_type}:{response.principal_name}",
            "requester": _requester(response.token_requester_principal_type,
                                    response.token_requester_principal_name),
            "renewers": [str(p) for p in renewer_principals],
            "issue_timestamp_ms": response.issue_timestamp_ms,
            "expiry_timestamp_ms": response.expiry_timestamp_ms,
            "max_timestamp_ms": response.max_timestamp_ms}


def renew_token(client: KafkaClient, hmac_b64: str, period_ms: int = -1) -> int:
    """The token's new expiry timestamp (ms)."""
    _, response = client.any_broker().request(RENEW, messages.RenewDelegationTokenRequest(
        hmac=_hmac(hmac_b64), renew_period_ms=period_ms))
    check(response.error_code, None, "renew delegation token")
    return response.expiry_timestamp_ms


def expire_token(client: KafkaClient, hmac_b64: str, period_ms: int = -1) -> int:
    _, response = client.any_broker().request(EXPIRE, messages.ExpireDelegationTokenRequest(
        hmac=_hmac(hmac_b64), expiry_time_period_ms=period_ms))
    check(response.error_code, None, "expire delegation token")
    return response.expiry_timestamp_ms


def describe_tokens(client: KafkaClient, owners=None) -> list[dict]:
    R = messages.DescribeDelegationTokenRequest
    principals = [_principal(o) for o in owners] if owners else None
    _, response = client.any_broker().request(DESCRIBE, R(owners=None if principals is None else [
        R.DescribeDelegationTokenOwner(principal_type=p.principal_type, principal_name=p.name)
        for p in principals]))
    check(response.error_code, None, "describe delegation tokens")
    return [{"token_id": t.token_id, "hmac": base64.b64encode(t.hmac).decode(),
             "owner": f"{t.principal_type}:{t.principal_name}",
             "requester": _requester(t.token_requester_principal_type,
                                     t.token_requester_principal_name),
             "renewers": [f"{r.principal_type}:{r.principal_name}" for r in t.renewers],
             "issue_timestamp_ms": t.issue_timestamp, "expiry_timestamp_ms": t.expiry_timestamp,
             "max_timestamp_ms": t.max_timestamp} for t in response.tokens]


def _principal(text: str) -> KafkaPrincipal:
    try:
        return KafkaPrincipal.parse(text)
    except ValueError as exc:
        raise ValueError(f"{exc} (e.g. User:alice)") from None


def _requester(principal_type: str, name: str) -> str | None:
    return f"{principal_type}:{name}" if principal_type else None   # v3+ only


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("--hmac must be the token's HMAC in base64") from None


def _when(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _show(tokens: list[dict], as_json: bool) -> None:
    if as_json:
        emit_json(tokens)
        return
    table(["TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUED", "EXPIRES", "MAX"],
          [(t["token_id"], t["hmac"], t["owner"], t["requester"] or "-",
            ",".join(t["renewers"]) or "-", _when(t["issue_timestamp_ms"]),
            _when(t["expiry_timestamp_ms"]), _when(t["max_timestamp_ms"])) for t in tokens])


def _create(client: KafkaClient, args: argparse.Namespace) -> int:
    _show([create_token(client, args.renewer_principal or (), args.owner_principal,
                        args.max_life_time_period)], args.json)
    return 0


def _renew(client: KafkaClient, args: argparse.Namespace) -> int:
    expiry = renew_token(client, args.hmac, args.renew_time_period)
    if args.json:
        emit_json({"expiry_timestamp_ms": expiry})
    else:
        info(f"renewed: the token now expires at {_when(expiry)}")
    return 0


def _expire(client: KafkaClient, args: argparse.Namespace) -> int:
    expiry = expire_token(client, args.hmac, args.expiry_time_period)
    if args.json:
        emit_json({"expiry_timestamp_ms": expiry})
    elif args.expiry_time_period < 0:
        info("expired: the token is gone")
    else:
        info(f"the token now expires at {_when(expiry)}")
    return 0


def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    _show(describe_tokens(client, args.owner_principal), args.json)
    return 0


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    tokens = subparsers.add_parser("tokens", help="delegation tokens (kafka-delegation-tokens)")
    sub = tokens.add_subparsers(dest="tokens_command", required=True)

    create = sub.add_parser("create", parents=[common], help="create a token")
    create.add_argument("--renewer-principal", action="append", metavar="User:NAME",
                        help="who may renew it besides the owner (repeatable)")
    create.add_argument("--owner-principal", metavar="User:NAME",
                        help="create it for someone else (needs CreateTokens on that user)")
    create.add_argument("--max-life-time-period", type=int, default=-1, metavar="MS",
                        help="at most delegation.token.max.lifetime.ms (default: that)")
    create.set_defaults(func=runs(_create))

    renew = sub.add_parser("renew", parents=[common], help="push a token's expiry back")
    renew.add_argument("--hmac", required=True, help="the token's HMAC (base64)")
    renew.add_argument("--renew-time-period", type=int, default=-1, metavar="MS",
                       help="from now (default delegation.token.expiry.time.ms)")
    renew.set_defaults(func=runs(_renew))

    expire = sub.add_parser("expire", parents=[common], help="expire a token")
    expire.add_argument("--hmac", required=True, help="the token's HMAC (base64)")
    expire.add_argument("--expiry-time-period", type=int, default=-1, metavar="MS",
                        help="from now; negative (default): at once, the token is removed")
    expire.set_defaults(func=runs(_expire))

    describe = sub.add_parser("describe", parents=[common],
                              help="tokens you own, renew, or may describe")
    describe.add_argument("--owner-principal", action="append", metavar="User:NAME",
                          help="only these owners' tokens (repeatable)")
    describe.set_defaults(func=runs(_describe))
