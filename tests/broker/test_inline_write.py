"""A response finished while the connection's writer sleeps goes out from the finishing task; what a
full socket leaves over (mid-buffer or mid-file-slice) the writer sends, before anything behind it."""

import collections
import os
import socket
import struct
import time
from types import SimpleNamespace

import trio
import trio.testing

from broker.connection import _Slot
from broker.connection_writes import ResponseWrites, SlicedRecords


class FakeFileSlice:
    def __init__(self, fd, position, length):
        self.fd, self.position, self.length = fd, position, length

    def fileno(self):
        return self.fd

    def __len__(self):
        return self.length


class Writes(ResponseWrites):
    def __init__(self, sock):
        self.stream = SimpleNamespace(socket=sock)
        self._fileno = sock.fileno()
        self._slots = collections.deque()
        self._writer_wakeup = None
        self._room = None
        self._pending = 0
        self._broken = False
        self._reading_done = False
        self._read_scope = trio.CancelScope()
        self.peer = "test"
        self.last_activity = time.monotonic()
        self.writer_woken = 0

    def add(self):
        slot = _Slot()
        self._slots.append(slot)
        self._pending += 1
        return slot

    def finish(self, slot, parts):
        """What Connection._handle does once a request is answered."""
        slot.parts, slot.done = parts, True
        if not self._write_now(slot):
            self.writer_woken += 1
            if self._writer_wakeup is not None:
                self._writer_wakeup.set()
                self._writer_wakeup = None


def _framed(*payloads):
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def test_inline_writes_and_the_writer_taking_over_a_partial_one(tmp_path):
    data = bytes(range(256)) * 4096                      # 1 MiB of "records" in a file
    path = tmp_path / "segment"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)

    async def main():
        left, right = trio.socket.socketpair()
        left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)    # a big response cannot fit
        received = bytearray()
        conn = Writes(left)
        small = [b"head", b"", b"tail"]
        big = [b"H" * 10, SlicedRecords([FakeFileSlice(fd, 0, len(data))]), b"T" * 5]
        expected = _framed(b"headtail", b"headtail", b"H" * 10 + data + b"T" * 5, b"after")

        async def read_all():
            while len(received) < len(expected):
                chunk = await right.recv(65536)
                assert chunk
                received.extend(chunk)

        with left, right:
            with trio.fail_after(20):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(conn._write_loop, nursery.cancel_scope)
                    await trio.testing.wait_all_tasks_blocked()
                    first = conn.add()
                    conn.finish(first, small)          # the writer sleeps: sent right here
                    assert conn.writer_woken == 0 and not conn._slots
                    second, third = conn.add(), conn.add()
                    conn.finish(second, small)         # head of the line: inline again
                    assert conn.writer_woken == 0
                    conn.finish(third, big)            # the socket fills: the writer finishes it
                    assert conn.writer_woken == 1 and third.rest
                    fourth = conn.add()
                    conn.finish(fourth, [b"after"])    # the writer is awake: left to it
                    nursery.start_soon(read_all)
                    while conn._slots or len(received) < len(expected):
                        await trio.sleep(0.01)
                    conn._reading_done = True
                    conn.finish(conn.add(), None)      # an acks=0 produce: nothing to send
        return bytes(received), expected, conn._pending

    try:
        received, expected, pending = trio.run(main)
    finally:
        os.close(fd)
    assert received == expected and pending == 0
