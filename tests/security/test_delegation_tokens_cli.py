"""``odradek tokens create|renew|expire|describe`` against a real ``odradek serve`` and, like every
admin tool, against the reference Apache Kafka 3.9 (-m slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.security.token_brokers import password, serve_with_users


@pytest.fixture(scope="module", params=["odradek", pytest.param("kafka", marks=pytest.mark.slow)])
def target(request, tmp_path_factory):
    yield from serve_with_users(request.param, tmp_path_factory.mktemp(f"tokens-cli-{request.param}"), {})


def tokens(target, user: str | None, *args, tmp_path):
    """Run ``odradek tokens ARGS`` as `user` over SASL/SCRAM (None: over PLAINTEXT)."""
    bootstrap = target.plain
    options = []
    if user:
        path = tmp_path / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                        f"sasl.username={user}\nsasl.password={password(user)}\n")
        bootstrap, options = target.sasl, ["--command-config", str(path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "broker.cli", "tokens", *args, "-b", bootstrap,
                           *options], capture_output=True, text=True, timeout=60, env=env)


def described(target, user, tmp_path, *args, present=True, token_id):
    """`tokens describe --json`, waiting up to 10 s for `token_id` to be there (or gone)."""
    deadline = time.monotonic() + 10
    while True:
        done = tokens(target, user, "describe", "--json", *args, tmp_path=tmp_path)
        assert done.returncode == 0, done.stderr
        found = {t["token_id"]: t for t in json.loads(done.stdout)}
        if (token_id in found) == present or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_create_describe_renew_expire(target, tmp_path):
    made = tokens(target, "alice", "create", "--renewer-principal", "User:bob",
                  "--max-life-time-period", "600000", "--json", tmp_path=tmp_path)
    assert made.returncode == 0, made.stderr
    [token] = json.loads(made.stdout)
    assert (token["owner"], token["requester"], token["renewers"]) == \
        ("User:alice", "User:alice", ["User:bob"])
    assert token["max_timestamp_ms"] - token["issue_timestamp_ms"] == 600_000
    seen = described(target, "alice", tmp_path, token_id=token["token_id"])
    assert seen[token["token_id"]]["hmac"] == token["hmac"]
    assert token["token_id"] in described(target, "bob", tmp_path, "--owner-principal",
                                          "User:alice", token_id=token["token_id"])
    before = int(time.time() * 1000)
    renewed = tokens(target, "bob", "renew", "--hmac", token["hmac"], "--renew-time-period",
                     "60000", "--json", tmp_path=tmp_path)
    assert renewed.returncode == 0, renewed.stderr
    assert abs(json.loads(renewed.stdout)["expiry_timestamp_ms"] - before - 60_000) < 5000
    refused = tokens(target, "carol", "expire", "--hmac", token["hmac"], tmp_path=tmp_path)
    assert refused.returncode == 1 and "DELEGATION_TOKEN_OWNER_MISMATCH" in refused.stderr
    expired = tokens(target, "alice", "expire", "--hmac", token["hmac"], tmp_path=tmp_path)
    assert expired.returncode == 0, expired.stderr
    assert token["token_id"] not in described(target, "alice", tmp_path, present=False,
                                              token_id=token["token_id"])


def test_refusals_are_reported(target, tmp_path):
    plain = tokens(target, None, "describe", tmp_path=tmp_path)
    assert plain.returncode == 1 and "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in plain.stderr
    unknown = tokens(target, "alice", "renew", "--hmac", "bm9uZQ==", tmp_path=tmp_path)
    assert unknown.returncode == 1 and "DELEGATION_TOKEN_NOT_FOUND" in unknown.stderr
    garbled = tokens(target, "alice", "renew", "--hmac", "not base64!", tmp_path=tmp_path)
    assert garbled.returncode == 1 and "base64" in garbled.stderr
    table = tokens(target, "alice", "create", tmp_path=tmp_path)
    assert table.returncode == 0 and "TOKENID" in table.stdout and "User:alice" in table.stdout
