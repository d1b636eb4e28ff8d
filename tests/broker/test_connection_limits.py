"""Connection-level limits: frames buffered as they arrive, queued.max.request.bytes, and the
max.connections (the acceptor waits) / max.connections.per.ip (closed after accept) quotas."""

import socket
import struct
import time

import protocol
from broker.connection import FRAME_STEP
from broker.testing import running_broker
from protocol import messages

from tests.broker.raw_client import RawClient, batch
from tests.broker.test_frame_buffers import _capture_appends


def _produce_frame(topic: str, records: bytes, correlation_id: int) -> bytes:
    P = messages.ProduceRequest
    body = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.PartitionProduceData(index=0, records=records)])])
    frame = protocol.encode_request(0, 9, correlation_id, "limits", body)
    return struct.pack(">i", len(frame)) + frame


def _api_versions(correlation_id: int) -> bytes:
    frame = protocol.encode_request(18, 0, correlation_id, "limits", messages.ApiVersionsRequest())
    return struct.pack(">i", len(frame)) + frame


def _wait_until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _is_closed_by_broker(sock: socket.socket) -> bool:
    """True when the broker closed `sock` without answering a request sent on it."""
    sock.settimeout(5)
    try:
        sock.sendall(_api_versions(9))
        return sock.recv(1 << 16) == b""
    except OSError:
        return True


def test_a_large_frame_trickling_in_over_several_buffer_steps_arrives_whole_and_uncopied(
        client, broker):
    client.create_topic("trickle", configs={"max.message.bytes": str(4 * FRAME_STEP)})
    seen = _capture_appends(broker, "trickle")
    records = batch([bytes([i % 251]) * 1000 for i in range(int(FRAME_STEP * 2.5) // 1000)])
    data = _produce_frame("trickle", records, 77)
    piece = 300_000
    for start in range(0, len(data), piece):   # several partial reads per buffer step
        client.send_raw(data[start:start + piece])
        time.sleep(0.01)
    correlation_id, response = client.receive(0, 9)
    assert correlation_id == 77
    assert response.responses[0].partition_responses[0].error_code == 0
    assert len(seen) == 1 and type(seen[0]) is memoryview
    assert type(seen[0].obj) is bytearray   # a view of the frame buffer, not a copy
    assert bytes(seen[0]) == records


def test_queued_max_request_bytes_bounds_but_never_deadlocks(tmp_path):
    # A bound smaller than any request: each request still goes through (one at a time).
    with running_broker(tmp_path / "data", {"queued.max.request.bytes": "1"}) as running:
        memory = running.broker.request_memory
        sockets = [socket.create_connection(("127.0.0.1", running.port), timeout=10)
                   for _ in range(3)]
        try:
            for sock in sockets:
                sock.sendall(b"".join(_api_versions(i) for i in range(20)))
            for sock in sockets:
                reader = RawClient.__new__(RawClient)
                reader.sock = sock
                assert [reader.receive(18, 0)[0] for _ in range(20)] == list(range(20))
            # A large frame cut off half-way gives its reservation back.
            with socket.create_connection(("127.0.0.1", running.port), timeout=10) as cut:
                cut.sendall(struct.pack(">i", 5 * FRAME_STEP) + b"\0" * FRAME_STEP)
            assert _wait_until(lambda: memory.used == 0), memory.used
        finally:
            for sock in sockets:
                sock.close()
        with RawClient("127.0.0.1", running.port) as client:   # still serving
            assert client.request(18, 0, messages.ApiVersionsRequest()).error_code == 0


def test_at_max_connections_the_next_one_waits_for_a_free_slot(tmp_path):
    # Kafka's acceptor stops accepting at max.connections; the client waits in the backlog and
    # is served once another connection closes.
    with running_broker(tmp_path / "data", {"max.connections": "2"}) as running:
        first = RawClient("127.0.0.1", running.port)
        second = RawClient("127.0.0.1", running.port)
        try:
            for held in (first, second):
                assert held.request(18, 0, messages.ApiVersionsRequest()).error_code == 0
            with RawClient("127.0.0.1", running.port) as waiting:
                waiting.send(18, 0, messages.ApiVersionsRequest(), correlation_id=5)
                waiting.sock.settimeout(0.5)
                try:
                    answered = waiting.sock.recv(1)
                except socket.timeout:
                    answered = None
                assert answered is None, "a connection past max.connections was served"
                first.close()
                waiting.sock.settimeout(10)
                assert waiting.receive(18, 0)[0] == 5
            assert second.request(18, 0, messages.ApiVersionsRequest()).error_code == 0
        finally:
            first.close()
            second.close()


def test_max_connections_per_ip_counts_each_address_and_frees_on_close(tmp_path):
    with running_broker(tmp_path / "data", {"max.connections.per.ip": "1"}) as running:
        with RawClient("127.0.0.1", running.port) as held:
            assert held.request(18, 0, messages.ApiVersionsRequest()).error_code == 0
            with socket.create_connection(("127.0.0.1", running.port), timeout=5) as extra:
                assert _is_closed_by_broker(extra)
            assert running.broker._connections_per_ip == {"127.0.0.1": 1}
        assert _wait_until(lambda: running.broker._connections_per_ip == {})
        with RawClient("127.0.0.1", running.port) as again:
            assert again.request(18, 0, messages.ApiVersionsRequest()).error_code == 0


def test_max_connections_per_ip_overrides_apply_and_change_without_a_restart(tmp_path):
    I = messages.IncrementalAlterConfigsRequest
    with running_broker(tmp_path / "data", {"max.connections.per.ip": "1",
                                            "max.connections.per.ip.overrides": "127.0.0.1:3"}) as running:
        with RawClient("127.0.0.1", running.port) as admin, \
                RawClient("127.0.0.1", running.port) as second, \
                RawClient("127.0.0.1", running.port) as third:
            for client in (admin, second, third):    # 3 allowed for 127.0.0.1, 1 for others
                assert client.request(18, 0, messages.ApiVersionsRequest()).error_code == 0
            with socket.create_connection(("127.0.0.1", running.port), timeout=5) as fourth:
                assert _is_closed_by_broker(fourth)
            altered = admin.request(44, 1, I(resources=[I.AlterConfigsResource(
                resource_type=4, resource_name="", configs=[I.AlterableConfig(
                    name="max.connections.per.ip.overrides", config_operation=0,
                    value="127.0.0.1:5")])], validate_only=False))
            assert altered.responses[0].error_code == 0
            assert _wait_until(lambda: running.broker.config[
                "max.connections.per.ip.overrides"] == "127.0.0.1:5", timeout=10)
            with RawClient("127.0.0.1", running.port) as fourth:
                assert fourth.request(18, 0, messages.ApiVersionsRequest()).error_code == 0
            bad = admin.request(44, 1, I(resources=[I.AlterConfigsResource(
                resource_type=4, resource_name="", configs=[I.AlterableConfig(
                    name="max.connections.per.ip.overrides", config_operation=0,
                    value="127.0.0.1")])], validate_only=True))
            assert bad.responses[0].error_code == 42   # INVALID_REQUEST, as Kafka


def test_a_listener_max_connections_applies_without_a_restart(tmp_path):
    # Kafka's listener.name.<listener>.max.connections, set at runtime: the limited listener's
    # acceptor waits at its limit while the others accept; a bad value is refused at alter time.
    I = messages.IncrementalAlterConfigsRequest
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,LIMITED://127.0.0.1:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,LIMITED:PLAINTEXT"}

    def alter(admin, value, validate_only=False):
        return admin.request(44, 1, I(resources=[I.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[I.AlterableConfig(
                name="listener.name.limited.max.connections", config_operation=0, value=value)])],
            validate_only=validate_only)).responses[0].error_code

    with running_broker(tmp_path / "data", config) as running:
        ports = {listener.name: port for listener, port in running.broker._bound}
        with RawClient("127.0.0.1", ports["PLAINTEXT"]) as admin, \
                RawClient("127.0.0.1", ports["LIMITED"]) as held:
            assert held.request(18, 0, messages.ApiVersionsRequest()).error_code == 0
            assert alter(admin, "abc", validate_only=True) == 42   # INVALID_REQUEST, as Kafka
            assert alter(admin, "1") == 0
            assert _wait_until(lambda: running.broker.config.get(
                "listener.name.limited.max.connections") == "1", timeout=10)
            with RawClient("127.0.0.1", ports["LIMITED"]) as waiting, \
                    RawClient("127.0.0.1", ports["PLAINTEXT"]) as other:
                waiting.send(18, 0, messages.ApiVersionsRequest(), correlation_id=5)
                waiting.sock.settimeout(1.5)
                try:
                    answered = waiting.sock.recv(1)
                except socket.timeout:
                    answered = None
                assert answered is None, "a connection past the listener's max.connections was served"
                assert other.request(18, 0, messages.ApiVersionsRequest()).error_code == 0
                assert alter(admin, "2") == 0                         # raised: the waiting one is served
                waiting.sock.settimeout(15)
                assert waiting.receive(18, 0)[0] == 5
