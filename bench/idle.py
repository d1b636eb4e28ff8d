"""Idle client connections: each connects, completes an ApiVersions v0 round trip, then sits there.

That is what an idle Kafka client looks like to a broker between requests, so the scaling rows show
what an open connection costs (memory, and any per-connection work in the event loop).
"""

from __future__ import annotations

import socket
import struct

API_VERSIONS = 18
CLIENT_ID = b"odradek-bench-idle"


def api_versions_request(correlation_id: int) -> bytes:
    """A size-prefixed ApiVersions v0 request (header v1, empty body)."""
    header = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(header)) + header


def read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(size - got)
        if not chunk:
            raise ConnectionError("server closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class IdleConnections:
    """Context manager holding `count` handshaken connections open."""

    def __init__(self, host: str, port: int, count: int, timeout: float = 10.0):
        self.host, self.port, self.count, self.timeout = host, port, count, timeout
        self.sockets: list[socket.socket] = []

    def __enter__(self) -> "IdleConnections":
        try:
            for correlation_id in range(self.count):
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
                self.sockets.append(sock)
                sock.sendall(api_versions_request(correlation_id))
                (answered,) = struct.unpack_from(">i", read_frame(sock))
                if answered != correlation_id:
                    raise ConnectionError(f"correlation id {answered} != {correlation_id}")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()
