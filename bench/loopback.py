"""Raw loopback TCP throughput: how many bytes/s this machine moves between two local sockets.

One sender thread writes 1 MiB chunks, one receiver thread reads them into a reused buffer; both
release the GIL inside the socket calls, so this is the kernel's loopback copy speed, the hard
ceiling under any broker's MB/s on this machine.
"""

from __future__ import annotations

import socket
import threading
import time

CHUNK = 1 << 20


def loopback_bytes_per_second(duration: float = 1.0) -> float:
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    received = 0

    def drain() -> None:
        nonlocal received
        buffer = memoryview(bytearray(CHUNK))
        while n := receiver.recv_into(buffer):
            received += n

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    chunk = b"\0" * CHUNK
    began = time.perf_counter()
    stop_at = began + duration
    try:
        while time.perf_counter() < stop_at:
            sender.sendall(chunk)
        elapsed = time.perf_counter() - began
        total = received  # bytes already read when the clock stopped
    finally:
        sender.close()
        reader.join(timeout=5)
        receiver.close()
    return total / elapsed
