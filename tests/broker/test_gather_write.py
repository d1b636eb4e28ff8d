"""The connection's gather write survives partial writes and more buffers than one sendmsg takes."""

import socket
from types import SimpleNamespace

import trio

from broker.connection import Connection


def test_send_buffers_writes_everything_in_order_through_partial_writes():
    buffers = [bytes([i % 256]) * (1 + (i * 7919) % 9000) for i in range(1500)]   # > 2 x _MAX_IOV
    buffers[10] = memoryview(bytearray(b"view" * 5000))
    expected = b"".join(bytes(b) for b in buffers)

    async def main():
        left, right = trio.socket.socketpair()
        left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)   # force partial writes
        received = bytearray()

        async def read_slowly():
            while len(received) < len(expected):
                chunk = await right.recv(3000)
                assert chunk
                received.extend(chunk)
                await trio.sleep(0)

        with left, right:
            fake = SimpleNamespace(stream=SimpleNamespace(socket=left), _fileno=left.fileno())
            with trio.fail_after(20):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(read_slowly)
                    await Connection._send_buffers(fake, list(buffers))
        return bytes(received)

    assert trio.run(main) == expected
