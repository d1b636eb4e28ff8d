"""Every API and version both brokers support, sent with its emptiest body (and with every nullable
field null) to Kafka and to Odradek: both must answer alike — both close the connection, or both
answer with the same error codes (compare.py's allow-list for the rest).

    python -m tests.differential.sweep KAFKA_HOST:PORT ODRADEK_HOST:PORT
"""

from __future__ import annotations

import socket
import struct
import sys
import time

import protocol
from protocol import messages

from tests.differential.compare import differences
from tests.differential.replay import RETRIES, RETRY_PAUSE_S, _retriable
from tests.protocol.bodies import empty_body

TIMEOUT_S = 5.0
# Versions Kafka 3.9 and Odradek (a 4.x broker) legitimately support differently are not compared:
# only the intersection of what both advertise is sent.


def advertised(address) -> dict[int, tuple[int, int]]:
    body = _request(address, 18, 3, messages.ApiVersionsRequest(
        client_software_name="sweep", client_software_version="1"))
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}


def _request(address, api_key: int, version: int, body):
    frame = protocol.encode_request(api_key, version, 7, "sweep", body)
    with socket.create_connection(address, timeout=TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        try:
            size = struct.unpack(">i", _exactly(sock, 4))[0]
            return protocol.decode_response(api_key, version, _exactly(sock, size))[1]
        except (ConnectionError, OSError):
            return None


def _exactly(sock, size):
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def warm_up(address, timeout_s: float = 90.0) -> None:
    """Make the broker create and load its group and transaction coordinators first (a fresh
    Kafka answers NOT_COORDINATOR to group requests until __consumer_offsets exists)."""
    deadline = time.monotonic() + timeout_s
    for key_type in (0, 1):
        while time.monotonic() < deadline:
            answer = _request(address, 10, 1, messages.FindCoordinatorRequest(key="warm-up", key_type=key_type))
            if answer is not None and answer.error_code == 0:
                break
            time.sleep(0.5)


def cases(kafka: dict, odradek: dict):
    """(api_key, version, nulls) for the versions both advertise."""
    for key in sorted(set(kafka) & set(odradek)):
        if key not in messages.REQUESTS:
            continue
        low = max(kafka[key][0], odradek[key][0])
        high = min(kafka[key][1], odradek[key][1])
        for version in range(low, high + 1):
            if version in messages.REQUESTS[key].SCHEMAS:
                for nulls in (False, True):
                    yield key, version, nulls


def body_for(key: int, version: int, nulls: bool):
    body = empty_body(messages.REQUESTS[key].SCHEMAS[version], nulls)
    if key == 0:
        body.acks = -1          # acks=0 gets no answer at all, from either broker
    return body


def _settled(address, key, version, nulls):
    """The answer once the broker stops answering with retriable errors (a loading coordinator)."""
    for _ in range(RETRIES):
        answer = _request(address, key, version, body_for(key, version, nulls))
        if not _retriable(answer):
            break
        time.sleep(RETRY_PAUSE_S)
    return answer


def compare_case(kafka_address, odradek_address, key, version, nulls) -> list[str]:
    a = _settled(kafka_address, key, version, nulls)
    b = _settled(odradek_address, key, version, nulls)
    name = f"{protocol.API_SPECS[key].name} v{version}{' nulls' if nulls else ''}"
    if a is None or b is None:
        return [] if (a is None) == (b is None) else \
            [f"{name}: connection closed by {'Kafka' if a is None else 'Odradek'} only"]
    return [f"{name} {d}" for d in differences(a, b)]


def _address(text: str):
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv) -> int:
    kafka, odradek = _address(argv[0]), _address(argv[1])
    warm_up(kafka)
    warm_up(odradek)
    found = []
    for key, version, nulls in cases(advertised(kafka), advertised(odradek)):
        found += compare_case(kafka, odradek, key, version, nulls)
    for line in found:
        print(line)
    print(f"{len(found)} differences")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
