"""Delegation tokens live in the metadata log: they survive a restart, the periodic expiry check
removes the expired ones (against Kafka 3.9 too, -m slow), and in a 3-node cluster a token made
through any broker is known to every broker, which all let it log in."""

from __future__ import annotations

import base64
import time

import pytest

from protocol import messages as m

from broker.admin.client import KafkaClient, KafkaError
from broker.testing_cluster import Cluster, free_port
from tests.security.token_brokers import (TOKEN_SETTINGS, add_users, odradek_serve, scram_security,
                                          start_kafka, wait_for_login)

CHECK_EVERY = {"delegation.token.expiry.check.interval.ms": "500"}
CR = m.CreateDelegationTokenRequest


def create(address: str, user: str = "alice", max_lifetime_ms: int = -1):
    with KafkaClient(address, security=scram_security(user)) as client:
        _, created = client.any_broker().request(38, CR(
            owner_principal_type=None, owner_principal_name=None, renewers=[],
            max_lifetime_ms=max_lifetime_ms))
    assert created.error_code == 0
    return created


def listed(address: str, user: str = "alice") -> set[str]:
    with KafkaClient(address, security=scram_security(user)) as client:
        _, response = client.any_broker().request(41, m.DescribeDelegationTokenRequest(owners=None))
    return {t.token_id for t in response.tokens}


def wait_until(predicate, what: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def logs_in(address: str, token) -> bool:
    security = scram_security(token.token_id, base64.b64encode(bytes(token.hmac)).decode(),
                              token=True)
    try:
        with KafkaClient(address, security=security) as client:
            return bool(client.metadata().brokers)
    except KafkaError:
        return False


@pytest.mark.parametrize("target", ["odradek", pytest.param("kafka", marks=pytest.mark.slow)])
def test_tokens_survive_a_restart_and_expired_ones_are_swept(target, tmp_path):
    if target == "kafka":
        from tests import apache_kafka as oracle
        if oracle.skip_reason():
            pytest.skip(oracle.skip_reason())
        process, broker = start_kafka(tmp_path, CHECK_EVERY)
        restart = lambda: (process.stop(), process.start())   # noqa: E731
    else:
        process, broker = odradek_serve(tmp_path / "data", CHECK_EVERY)
        restart = lambda: (process.stop(), process.start())   # noqa: E731
    try:
        add_users(broker.plain)
        wait_for_login(broker.sasl)
        lasting, brief = create(broker.sasl), create(broker.sasl, max_lifetime_ms=3000)
        wait_until(lambda: {lasting.token_id, brief.token_id} <= listed(broker.sasl), "the tokens")
        restart()
        wait_for_login(broker.sasl)
        assert lasting.token_id in listed(broker.sasl)
        assert logs_in(broker.sasl, lasting)
        wait_until(lambda: brief.token_id not in listed(broker.sasl), "the sweep", timeout=20)
        assert not logs_in(broker.sasl, brief)
        assert lasting.token_id in listed(broker.sasl)
    finally:
        process.stop()


def test_every_broker_of_a_cluster_knows_a_token_made_through_any(tmp_path):
    cluster = Cluster(tmp_path, nodes=3, overrides=TOKEN_SETTINGS)
    sasl = {}
    for node in cluster.nodes.values():
        sasl[node.node_id] = f"127.0.0.1:{free_port()}"
        node.settings["listeners"] = (f"PLAINTEXT://127.0.0.1:{node.port},"
                                      f"CONTROLLER://127.0.0.1:{node.controller_port},"
                                      f"SASL_PLAINTEXT://{sasl[node.node_id]}")
    try:
        for node_id in cluster.nodes:
            cluster.start(node_id)
        cluster.wait_started(list(cluster.nodes), 60)
        cluster.wait_formed()
        add_users(cluster.bootstrap)
        active = cluster.active_controller()
        others = [n for n in cluster.nodes if n != active]
        for node_id in cluster.nodes:
            wait_for_login(sasl[node_id])
        token = create(sasl[others[0]])   # forwarded to the active controller
        for node_id in cluster.nodes:
            wait_until(lambda: token.token_id in listed(sasl[node_id]), f"node {node_id}")
            assert logs_in(sasl[node_id], token)
        with KafkaClient(sasl[others[1]], security=scram_security("alice")) as client:
            _, renewed = client.any_broker().request(39, m.RenewDelegationTokenRequest(
                hmac=bytes(token.hmac), renew_period_ms=60_000))
            _, by_bob = client.any_broker().request(40, m.ExpireDelegationTokenRequest(
                hmac=b"unknown", expiry_time_period_ms=-1))
            assert (renewed.error_code, by_bob.error_code) == (0, 62)
            _, expired = client.any_broker().request(40, m.ExpireDelegationTokenRequest(
                hmac=bytes(token.hmac), expiry_time_period_ms=-1))
            assert expired.error_code == 0
        for node_id in cluster.nodes:
            wait_until(lambda: token.token_id not in listed(sasl[node_id]), f"node {node_id}")
            assert not logs_in(sasl[node_id], token)
    finally:
        cluster.close()
