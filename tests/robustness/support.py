"""Helpers for the robustness suite: seeded random bodies, bounded socket exchanges, health checks.

Every socket operation here has a timeout, so a broker that hangs makes a test fail, never stall.
"""

from __future__ import annotations

import random
import socket
import struct
import time
import uuid

import protocol
from protocol import messages, wire

from tests.broker.raw_client import RawClient

IO_TIMEOUT = 5.0
FUZZ_ID = 1234
FOLLOW_UP_ID = 999_999
_SIZE = struct.Struct(">i")

_INT_BITS = {"b": 8, "h": 16, "i": 32, "q": 64}
_STRINGS = ["", "t", "topic-a", "__consumer_offsets", "x" * 300, "bad name!", "\u00fc"]


# ------------------------------------------------------------------------------ random bodies

def random_value(wire_type, rng: random.Random, depth: int = 0):
    """A value of `wire_type`, biased towards edges (0, -1, extremes, nulls, odd names)."""
    if isinstance(wire_type, wire.Fixed):
        fmt = wire_type.fmt
        bits = _INT_BITS.get(fmt)
        if bits:
            low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
            return rng.choice([0, 1, -1, low, high, rng.randint(low, high)])
        if fmt == "H":
            return rng.choice([0, 1, 0xFFFF])
        if fmt == "I":
            return rng.choice([0, 1, 0xFFFFFFFF])
        if fmt == "?":
            return rng.random() < 0.5
        return rng.choice([0.0, 1.5, -1.0])
    if isinstance(wire_type, wire.Uuid):
        return rng.choice([wire.ZERO_UUID, uuid.UUID(int=rng.getrandbits(128))])
    if isinstance(wire_type, wire.Message):
        return random_body(wire_type, rng, depth + 1)
    if isinstance(wire_type, wire.NullableStruct):
        return None if rng.random() < 0.3 else random_body(wire_type.message, rng, depth + 1)
    if isinstance(wire_type, wire.Array):
        if wire_type.nullable and rng.random() < 0.2:
            return None
        count = rng.randrange(0, 3 if depth < 2 else 2)
        return [random_value(wire_type.element, rng, depth + 1) for _ in range(count)]
    if wire_type.nullable and rng.random() < 0.2:
        return None
    if isinstance(wire_type, wire.String):
        return rng.choice(_STRINGS)
    return rng.randbytes(rng.randrange(0, 80))


def random_body(schema, rng: random.Random, depth: int = 0):
    """A body valid for one (message, version) schema, with random present and tagged fields."""
    kwargs = {attr: random_value(t, rng, depth) for attr, t in schema.fields}
    for _tag, attr, t, _default in schema.tagged:
        if rng.random() < 0.3:
            kwargs[attr] = random_value(t, rng, depth)
    return schema.cls(**kwargs)


def random_request_frame(api_key: int, version: int, rng: random.Random, correlation_id: int = 1234,
                         attempts: int = 20) -> tuple[bytes, object] | None:
    """(frame without size prefix, body) of a random valid request, or None if none encodes."""
    schema = messages.REQUESTS[api_key].SCHEMAS[version]
    for _ in range(attempts):
        body = random_body(schema, rng)
        try:
            return protocol.encode_request(api_key, version, correlation_id, "fuzz", body), body
        except protocol.EncodeError:
            continue
    return None


def with_fixed_crc(data) -> bytes:
    """A v2 record batch with its CRC32C recomputed (so only checks beyond the CRC can refuse it)."""
    import crc32c
    from protocol.records import CRC_START

    data = bytearray(data)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[CRC_START:])))
    return bytes(data)


def sized(frame: bytes) -> bytes:
    return _SIZE.pack(len(frame)) + frame


# ------------------------------------------------------------------------------ socket helpers

def connect(port: int, timeout: float = IO_TIMEOUT) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
    return sock


def send_and_drain(port: int, data: bytes, timeout: float = IO_TIMEOUT,
                   half_close: bool = True) -> tuple[bytes, str]:
    """Send `data`, optionally half-close, read until the broker closes: (bytes read, outcome).

    outcome is "closed" (EOF or reset) or "timeout" (the broker neither answered fully nor closed).
    """
    with connect(port, timeout) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        received = bytearray()
        deadline = time.monotonic() + timeout
        while True:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                chunk = sock.recv(1 << 16)
            except socket.timeout:
                return bytes(received), "timeout"
            except ConnectionResetError:
                return bytes(received), "closed"
            if not chunk:
                return bytes(received), "closed"
            received += chunk


def split_frames(data: bytes) -> list[bytes]:
    """Whole size-prefixed frames in `data` (raises AssertionError on a torn frame)."""
    frames, pos = [], 0
    while pos < len(data):
        assert len(data) - pos >= 4, "torn size prefix"
        (size,) = _SIZE.unpack_from(data, pos)
        assert 0 <= size <= len(data) - pos - 4, f"torn frame: declared {size}"
        frames.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return frames


def wait_closed(sock: socket.socket, timeout: float = IO_TIMEOUT) -> str:
    """"closed" if the broker closes `sock` (after any data) within `timeout`, else "timeout"."""
    deadline = time.monotonic() + timeout
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            if not sock.recv(1 << 16):
                return "closed"
        except socket.timeout:
            return "timeout"
        except (ConnectionResetError, BrokenPipeError):
            return "closed"


def api_versions_ok(port: int, timeout: float = IO_TIMEOUT) -> bool:
    """A fresh connection gets a correct ApiVersions v3 answer."""
    with RawClient("127.0.0.1", port, timeout=timeout) as client:
        response = client.request(18, 3, messages.ApiVersionsRequest(
            client_software_name="health", client_software_version="1.0"))
        return response.error_code == 0 and any(k.api_key == 0 for k in response.api_keys)


def assert_healthy(port: int, topic: str | None = None, timeout: float = IO_TIMEOUT):
    """The broker answers a fresh connection correctly (ApiVersions, and Metadata for `topic`)."""
    assert api_versions_ok(port, timeout), "ApiVersions failed on a fresh connection"
    if topic is not None:
        with RawClient("127.0.0.1", port, timeout=timeout) as client:
            response = client.request(3, 12, messages.MetadataRequest(
                topics=[messages.MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False))
            assert response.topics[0].error_code == 0, response


def rss_kib(pid: str | int = "self") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# ------------------------------------------------------------------------------ one request, then a probe

def follow_up_frame() -> bytes:
    return sized(protocol.encode_request(18, 0, FOLLOW_UP_ID, "fuzz", messages.ApiVersionsRequest()))


def expects_no_answer(frame: bytes) -> bool:
    """True when Kafka sends nothing back (acks=0 Produce) for a frame the codec can decode."""
    try:
        header, body = protocol.decode_request(frame)
    except protocol.DecodeError:
        return False
    return header.api_key == 0 and getattr(body, "acks", None) == 0


def may_long_poll(frame: bytes) -> bool:
    """A Fetch that Kafka may legitimately hold for longer than our read timeout."""
    try:
        header, body = protocol.decode_request(frame)
    except protocol.DecodeError:
        return False
    return header.api_key == 1 and body.max_wait_ms > 1000


def exchange_then_follow_up(port: int, frame: bytes) -> tuple[list[int], str]:
    """Send `frame` and an ApiVersions behind it on one connection; (correlation ids, outcome).

    outcome: "answered" when the follow-up's answer arrived, "closed", or "timeout".
    """
    with connect(port) as sock:
        try:
            sock.sendall(sized(frame) + follow_up_frame())
        except (BrokenPipeError, ConnectionResetError):
            return [], "closed"
        data = bytearray()
        ids: list[int] = []
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except socket.timeout:
                return ids, "timeout"
            except ConnectionResetError:
                return ids, "closed"
            if not chunk:
                return ids, "closed"
            data += chunk
            while len(data) >= 8:
                (size,) = struct.unpack_from(">i", data)
                if len(data) < 4 + size:
                    break
                ids.append(struct.unpack_from(">i", data, 4)[0])
                del data[:4 + size]
            if ids and ids[-1] == FOLLOW_UP_ID:
                return ids, "answered"


def check_answered_or_closed(port: int, frame: bytes, what: str):
    ids, outcome = exchange_then_follow_up(port, frame)
    if outcome == "timeout" and may_long_poll(frame):
        return
    assert outcome != "timeout", f"{what}: neither answered nor closed within {IO_TIMEOUT}s"
    expected = [FOLLOW_UP_ID] if expects_no_answer(frame) else [FUZZ_ID, FOLLOW_UP_ID]
    assert ids == expected[:len(ids)], f"{what}: responses out of order or misnumbered: {ids}"
    if outcome == "answered":
        assert ids == expected, f"{what}: {ids}"
