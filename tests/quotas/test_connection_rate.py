"""Connection creation rate limits (KIP-612): the acceptor waits out a broker or listener rate;
a connection from an IP over its connection_creation_rate quota is closed after its throttle."""

import socket
import struct
import time

from protocol import messages

import protocol
from broker.controller.client_quotas import CONNECTION_CREATION_RATE, IP
from broker.quotas.connections import ConnectionRateQuotas
from broker.testing import make_config, running_broker
from tests.broker.raw_client import RawClient
from tests.quotas.test_quota_protocol import alter

WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


class FakeClock:
    def __init__(self):
        self.now_ms = 1_000_000

    def __call__(self):
        return self.now_ms


def test_rate_math_with_a_fake_clock(tmp_path):
    config = make_config(tmp_path, {**WINDOWS, "max.connection.creation.rate": "4",
                                    "listener.name.plaintext.max.connection.creation.rate": "2"})
    clock = FakeClock()
    quotas = ConnectionRateQuotas(config, clock)
    # listener: 2/s over at least one window; the third connection in the same instant waits
    assert [quotas.accept_delay_ms("PLAINTEXT") for _ in range(3)] == [0, 0, 500]
    assert quotas.accept_delay_ms("PLAINTEXT") == 1000          # capped at one window
    quotas.update({((IP, None),): {CONNECTION_CREATION_RATE: 1.0},
                   ((IP, "10.0.0.9"),): {CONNECTION_CREATION_RATE: 3.0}})
    assert quotas.ip_throttle_ms("10.0.0.1") == 0
    assert quotas.ip_throttle_ms("10.0.0.1") == 1000             # <default> ip: 1/s
    assert quotas.ip_throttle_ms("10.0.0.1") == 1000             # refused ones are not counted
    assert [quotas.ip_throttle_ms("10.0.0.9") for _ in range(4)] == [0, 0, 0, 333]
    clock.now_ms += 2000
    assert quotas.ip_throttle_ms("10.0.0.1") == 0


def _served(port: int) -> float | None:
    """Seconds until a new connection's ApiVersions is answered; None if it was closed."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        frame = protocol.encode_request(18, 3, 1, "conn-test", messages.ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        try:
            if not sock.recv(4):
                return None
        except ConnectionResetError:   # closed with unread data: a reset
            return None
    return time.monotonic() - started


def test_broker_wide_rate_delays_accepting(tmp_path):
    with running_broker(tmp_path / "data", {**WINDOWS, "max.connection.creation.rate": "5"}) as b:
        started = time.monotonic()
        served = [_served(b.port) for _ in range(12)]
        elapsed = time.monotonic() - started
    assert None not in served            # delayed, never refused
    # 5/s over at least one window: 12 connections take more than a second, not 12 instants
    assert elapsed >= 1.0, (elapsed, served)


def test_ip_quota_closes_after_the_throttle(tmp_path):
    with running_broker(tmp_path / "data", WINDOWS) as broker:
        with RawClient("127.0.0.1", broker.port) as client:   # counted before the quota exists
            assert alter(client, [("ip", "127.0.0.1")], [("connection_creation_rate", 2)]) == \
                [(0, None)]
        outcomes = []
        for _ in range(4):
            started = time.monotonic()
            outcomes.append((_served(broker.port), time.monotonic() - started))
        closed = [seconds for served, seconds in outcomes if served is None]
        assert closed, outcomes
        # closed only after the throttle time, not at once
        assert all(seconds >= 0.2 for seconds in closed), outcomes
        time.sleep(2.5)
        assert _served(broker.port) is not None   # the rate has fallen back: accepted again


def test_inter_broker_listener_spared_when_there_are_others(tmp_path):
    config = make_config(tmp_path, {**WINDOWS, "max.connection.creation.rate": "1",
                                    "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
                                    "listener.security.protocol.map":
                                        "PLAINTEXT:PLAINTEXT,CLIENTS:PLAINTEXT,"
                                        "CONTROLLER:PLAINTEXT"})
    quotas = ConnectionRateQuotas(config, FakeClock())
    assert [quotas.accept_delay_ms("PLAINTEXT", listeners=2) for _ in range(3)] == [0, 0, 0]
    assert [quotas.accept_delay_ms("CLIENTS", listeners=2) for _ in range(2)] == [0, 1000]
    # with a single listener nothing is spared
    assert quotas.accept_delay_ms("PLAINTEXT", listeners=1) == 1000
