"""A loopback TCP proxy that loses Produce responses, to make clients retry batches the broker already has.

The broker advertises the proxy's port, so every connection of the client goes through it. For the first
`drop` Produce responses the proxy closes the client's connection instead of passing the response on.
"""

from __future__ import annotations

import socket
import struct
import threading

PRODUCE = 0


class DropProduceResponses:
    def __init__(self, drop: int) -> None:
        self.drop = drop
        self.dropped = 0
        self.target_port: int | None = None
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.closed = False
        self.sockets: list[socket.socket] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> "DropProduceResponses":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.closed = True
        self.listener.close()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            self.sockets += [client, upstream]
            api_keys: dict[int, int] = {}
            threading.Thread(target=self._requests, args=(client, upstream, api_keys), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, api_keys), daemon=True).start()

    @staticmethod
    def _frames(sock: socket.socket):
        buffer = b""
        while True:
            while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack(">i", buffer[:4])[0]:
                size = struct.unpack(">i", buffer[:4])[0]
                yield buffer[:4 + size]
                buffer = buffer[4 + size:]
            chunk = sock.recv(65536)
            if not chunk:
                return
            buffer += chunk

    def _requests(self, client, upstream, api_keys) -> None:
        try:
            for frame in self._frames(client):
                api_key, _, correlation_id = struct.unpack(">hhi", frame[4:12])
                api_keys[correlation_id] = api_key
                upstream.sendall(frame)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def _responses(self, upstream, client, api_keys) -> None:
        try:
            for frame in self._frames(upstream):
                correlation_id = struct.unpack(">i", frame[4:8])[0]
                if api_keys.pop(correlation_id, None) == PRODUCE:
                    with self.lock:
                        lose = self.dropped < self.drop
                        if lose:
                            self.dropped += 1
                    if lose:
                        return  # the broker appended the batch; the client never hears of it
                client.sendall(frame)
        except OSError:
            pass
        finally:
            _close(client, upstream)


def _close(*sockets: socket.socket) -> None:
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
