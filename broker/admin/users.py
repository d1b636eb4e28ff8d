"""``odradek users scram set|delete|describe``: SCRAM credentials (AlterUserScramCredentials,
DescribeUserScramCredentials, KIP-554). The password is salted and hashed here; only the salted
password crosses the wire, as with Kafka's tools."""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from protocol import messages

from broker.admin.client import KafkaClient, check
from broker.admin.common import runs
from broker.admin.output import emit_json, info, table
from broker.security.sasl.scram import (MAX_ITERATIONS, MECHANISM_BY_TYPE, MECHANISMS,
                                        MIN_ITERATIONS, salted_password)

DESCRIBE, ALTER = 50, 51


def set_credential(client: KafkaClient, user: str, mechanism: str, password: str,
                   iterations: int = MIN_ITERATIONS) -> None:
    salt = os.urandom(32)
    upsertion = messages.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=MECHANISMS[mechanism][1], iterations=iterations, salt=salt,
        salted_password=salted_password(mechanism, password, salt,
                                        min(max(iterations, 1), MAX_ITERATIONS)))
    _alter(client, messages.AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]))


def delete_credential(client: KafkaClient, user: str, mechanism: str) -> None:
    deletion = messages.AlterUserScramCredentialsRequest.ScramCredentialDeletion(
        name=user, mechanism=MECHANISMS[mechanism][1])
    _alter(client, messages.AlterUserScramCredentialsRequest(deletions=[deletion], upsertions=[]))


def _alter(client: KafkaClient, body) -> None:
    _, response = client.any_broker().request(ALTER, body)
    for result in response.results:
        check(result.error_code, result.error_message, f"user {result.user}")


def describe_credentials(client: KafkaClient, users: list[str] | None = None) -> dict:
    """{user: {mechanism: iterations}}; a named user without credentials raises KafkaError."""
    Request = messages.DescribeUserScramCredentialsRequest
    body = Request(users=[Request.UserName(name=u) for u in users] if users else None)
    _, response = client.any_broker().request(DESCRIBE, body)
    check(response.error_code, response.error_message, "describe SCRAM credentials")
    out = {}
    for result in response.results:
        check(result.error_code, result.error_message, f"user {result.user}")
        out[result.user] = {MECHANISM_BY_TYPE.get(i.mechanism, str(i.mechanism)): i.iterations
                            for i in result.credential_infos}
    return out


def _password(args) -> str:
    if args.password is not None:
        return args.password
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    return getpass.getpass(f"SCRAM password for {args.user}: ")


def _set(client: KafkaClient, args: argparse.Namespace) -> int:
    password = _password(args)   # once: stdin holds one line for every mechanism
    for mechanism in args.mechanism:
        set_credential(client, args.user, mechanism, password, args.iterations)
    info(f"set {', '.join(args.mechanism)} credentials of {args.user}")
    return 0


def _delete(client: KafkaClient, args: argparse.Namespace) -> int:
    for mechanism in args.mechanism:
        delete_credential(client, args.user, mechanism)
    info(f"deleted {', '.join(args.mechanism)} credentials of {args.user}")
    return 0


def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    found = describe_credentials(client, args.users or None)
    if args.json:
        emit_json(found)
    else:
        table(["USER", "MECHANISM", "ITERATIONS"],
              [(user, mechanism, iterations) for user, mechanisms in sorted(found.items())
               for mechanism, iterations in sorted(mechanisms.items())])
    return 0


def add_commands(subparsers, common: argparse.ArgumentParser) -> None:
    users = subparsers.add_parser("users", help="user credentials (SCRAM)")
    scram = users.add_subparsers(dest="users_command", required=True).add_parser(
        "scram", help="SCRAM-SHA-256/512 credentials stored in the metadata log")
    sub = scram.add_subparsers(dest="scram_command", required=True)
    mechanisms = sorted(MECHANISMS)

    set_ = sub.add_parser("set", parents=[common], help="create or replace a credential")
    set_.add_argument("user")
    set_.add_argument("--mechanism", "-m", action="append", choices=mechanisms,
                      help="repeatable (default SCRAM-SHA-256 and SCRAM-SHA-512)")
    set_.add_argument("--iterations", type=int, default=MIN_ITERATIONS,
                      help=f"{MIN_ITERATIONS}..{MAX_ITERATIONS} (default {MIN_ITERATIONS})")
    secret = set_.add_mutually_exclusive_group()
    secret.add_argument("--password", help="(visible to other local users; prefer "
                                           "--password-stdin or the prompt)")
    secret.add_argument("--password-stdin", action="store_true",
                        help="read the password from the first line of stdin")
    set_.set_defaults(func=runs(_defaulted(_set)))

    delete = sub.add_parser("delete", parents=[common], help="remove a credential")
    delete.add_argument("user")
    delete.add_argument("--mechanism", "-m", action="append", choices=mechanisms)
    delete.set_defaults(func=runs(_defaulted(_delete)))

    describe = sub.add_parser("describe", parents=[common],
                              help="users with SCRAM credentials (mechanisms, iterations)")
    describe.add_argument("users", nargs="*")
    describe.set_defaults(func=runs(_describe))


def _defaulted(handler):
    def run(client, args):
        args.mechanism = args.mechanism or sorted(MECHANISMS)
        return handler(client, args)
    return run
