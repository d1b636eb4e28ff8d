"""Replay recorded request frames against a broker; compare two brokers' answers.

    python -m tests.differential.replay KAFKA_HOST:PORT ODRADEK_HOST:PORT [golden files...]

prints every difference outside compare.ALLOWED, per request. The test module runs a bounded
slice of this against the session's reference Kafka; this command runs all of it.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
from pathlib import Path

import protocol

from tests.differential.compare import differences, only_topics, record_differences

GOLDEN = Path(__file__).resolve().parent.parent / "protocol" / "golden"


def load_requests(path: Path) -> list[bytes]:
    return [bytes.fromhex(f["hex"]) for f in map(json.loads, path.read_text().splitlines())
            if f["dir"] == "request"]


def _expects_response(frame: bytes) -> bool:
    header, body = protocol.decode_request(frame)
    return not (header.api_key == 0 and body.acks == 0)


# Answers a client retries (a topic being created, a coordinator loading): the replay resends the
# request, as the recorded client did, so both brokers are compared once they are settled.
# UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
RETRIABLE = {3, 5, 6, 14, 15, 16, 51}
RETRIES = 40
RETRY_PAUSE_S = 0.25


def _retriable(body) -> bool:
    """Whether any error_code in the response is one a client would retry."""
    if body is None:
        return False
    if isinstance(body, list):
        return any(_retriable(item) for item in body)
    if not hasattr(body, "__slots__") or isinstance(body, (str, bytes)):
        return False
    for name in body.__slots__:
        value = getattr(body, name, None)
        if name.endswith("error_code") and value in RETRIABLE:
            return True
        if isinstance(value, list) or (hasattr(value, "__slots__") and not isinstance(value, (str, bytes))):
            if _retriable(value):
                return True
    return False


def replay(frames: list[bytes], address: tuple[str, int], timeout: float = 30.0) -> list:
    """[(api_key, api_version, response body or None if the connection closed)] per frame."""
    out = []
    sock = socket.create_connection(address, timeout=timeout)
    try:
        for frame in frames:
            header, _ = protocol.decode_request(frame)
            if not _expects_response(frame):
                sock.sendall(struct.pack(">i", len(frame)) + frame)
                continue
            for _attempt in range(RETRIES):
                try:
                    sock.sendall(struct.pack(">i", len(frame)) + frame)
                    (size,) = struct.unpack(">i", _exactly(sock, 4))
                    _, body = protocol.decode_response(header.api_key, header.api_version,
                                                       _exactly(sock, size))
                except (OSError, ConnectionError):
                    body = None
                    sock.close()
                    sock = socket.create_connection(address, timeout=timeout)
                    break
                if not _retriable(body):
                    break
                time.sleep(RETRY_PAUSE_S)
            out.append((header.api_key, header.api_version, body))
    finally:
        sock.close()
    return out


def compare_replays(kafka: list, odradek: list) -> list[str]:
    found = []
    for i, ((key, version, a), (_, _, b)) in enumerate(zip(kafka, odradek)):
        name = f"#{i} {protocol.API_SPECS[key].name} v{version}"
        if a is None or b is None:
            if (a is None) != (b is None):
                found.append(f"{name}: connection closed by {'Kafka' if a is None else 'Odradek'} only")
            continue
        if key == 3:   # Metadata: only the replayed client's topics (each broker has others)
            a, b = only_topics(a, "golden"), only_topics(b, "golden")
        found += [f"{name} {d}" for d in differences(a, b)]
        if key == 1:
            for t, (ta, tb) in enumerate(zip(a.responses, b.responses)):
                for p, (pa, pb) in enumerate(zip(ta.partitions, tb.partitions)):
                    found += [f"{name} {d}" for d in
                              record_differences(pa.records, pb.records, f".responses[{t}].partitions[{p}].records")]
    return found


def _exactly(sock, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str]) -> int:
    kafka, odradek, *files = argv
    paths = [Path(f) for f in files] or sorted(GOLDEN.glob("*.jsonl"))
    total = 0
    for path in paths:
        frames = load_requests(path)
        found = compare_replays(replay(frames, _address(kafka)), replay(frames, _address(odradek)))
        total += len(found)
        print(f"{path.name}: {len(frames)} requests, {len(found)} differences")
        for line in found:
            print("   ", line)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
