"""The writing half of a client connection (``broker.connection.Connection`` mixes it in).

Responses go out strictly in request order: a writer task sends every response that is ready in one
gather write (``writev``), record file slices with ``os.sendfile``. A response finished while the
writer sleeps and next in line is sent at once by the task that finished it, as far as the socket
takes it without waiting (``_write_now``): waking the writer task first cost a scheduler pass, 0.4 to
0.7 ms on a busy event loop, for every answer to a follower's or consumer's long poll, which
made up a good part of a replica round trip. What a full socket leaves over goes to the writer.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import time
from typing import Any

import trio

_SIZE = struct.Struct(">i")
_MAX_IOV = 512                                 # buffers per sendmsg, well under IOV_MAX (1024)
_MSG_MORE = getattr(socket, "MSG_MORE", 0)
_BYTES = (bytes, bytearray, memoryview)
CLOSE = object()   # a slot's parts when the connection is to close instead of answering


class SlicedRecords:
    """A Fetch ``records`` value made of storage file slices, sent with os.sendfile."""

    __slots__ = ("slices", "_size")

    def __init__(self, slices):
        self.slices = list(slices)
        self._size = sum(len(s) for s in self.slices)

    def __len__(self):
        return self._size


class _SliceRest:
    """The part of a file slice an inline write did not get out."""

    __slots__ = ("file_slice", "position", "length")

    def __init__(self, file_slice, position: int, length: int):
        self.file_slice = file_slice   # keeps the file (and its descriptor) alive meanwhile
        self.position, self.length = position, length

    def fileno(self) -> int:
        return self.file_slice.fileno()

    def __len__(self):
        return self.length


def _items(responses) -> list:
    """Size-prefixed responses as one flat list of byte parts and file slices, in order."""
    items: list[Any] = []
    for parts in responses:
        items.append(_SIZE.pack(len(parts[0]) if len(parts) == 1 else sum(map(len, parts))))
        for part in parts:
            if isinstance(part, SlicedRecords):
                items.extend(part.slices)
            elif not isinstance(part, _BYTES) or len(part):
                items.append(part)
    return items


class ResponseWrites:
    writes_inline = True   # a subclass whose writes are not plain socket writes (TLS) turns it off

    # The connection's state these methods use: _slots (deque of _Slot), _writer_wakeup, _room,
    # _pending, _broken, _reading_done, _read_scope, _fileno, stream, peer, last_activity.

    async def _write_loop(self, scope: trio.CancelScope):
        slots = self._slots
        while True:
            if not slots or not slots[0].done:
                if not slots and self._reading_done:
                    break
                self._writer_wakeup = trio.Event()
                await self._writer_wakeup.wait()
                continue
            # Clients pipeline: every response already done goes out in the same write (one
            # syscall per burst, not per response), in request order.
            ready = [slots.popleft()]
            while slots and slots[0].done:
                ready.append(slots.popleft())
            if self._room is not None:
                self._room.set()
                self._room = None
            rest, ready[0].rest = ready[0].rest, None   # what an inline write left of the first
            responses = []
            close = False
            for slot in ready:
                self._pending -= 1
                if slot.parts is CLOSE:
                    close = True
                    break
                if slot.parts is not None:
                    responses.append(slot.parts)
                if slot.close_after:
                    close = True
                    break
            if rest is not None:
                responses.pop(0)
            if (responses or rest) and not self._broken:
                try:
                    if rest:
                        await self._send_items(rest)
                    if responses:
                        await self._send_responses(responses)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    # Nobody to answer; the requests still in flight finish all the same.
                    self._write_failed(exc)
                else:
                    self.last_activity = time.monotonic()
            if close:
                break
        scope.cancel()   # every response is out and no request is coming (or closing): done

    def _write_failed(self, exc) -> None:
        import logging

        logging.getLogger("odradek.connection").debug("connection %s: write failed: %s", self.peer, exc)
        self._broken = True
        self._read_scope.cancel()

    # ------------------------------------------------------------------------ inline writes
    def _write_now(self, slot) -> bool:
        """Send `slot`'s response now if the writer sleeps and it is next in line; True when it
        is all out and the writer need not wake for it."""
        slots = self._slots
        if (not self.writes_inline or self._writer_wakeup is None or self._broken
                or not slots or slots[0] is not slot or slot.parts is None or slot.parts is CLOSE
                or slot.close_after):
            return False
        try:
            rest = self._send_items_nowait(_items((slot.parts,)))
        except OSError as exc:
            self._write_failed(exc)
            return False   # the writer drops the slot (and the rest) as for any broken socket
        if rest:
            slot.rest = rest
            return False
        slots.popleft()
        self._pending -= 1
        if self._room is not None:
            self._room.set()
            self._room = None
        self.last_activity = time.monotonic()
        # Responses done behind this one (or the connection's end) are the writer's job.
        return not (slots[0].done if slots else self._reading_done)

    def _send_items_nowait(self, items: list) -> list | None:
        """Write as much of `items` as the socket takes without waiting; what is left, or None."""
        fd = self._fileno
        index = 0
        while index < len(items):
            item = items[index]
            if isinstance(item, _BYTES):
                end = index + 1
                while end < len(items) and end - index < _MAX_IOV and isinstance(items[end], _BYTES):
                    end += 1
                try:
                    sent = os.writev(fd, items[index:end])
                except BlockingIOError:
                    return items[index:]
                while index < end and sent >= len(items[index]):
                    sent -= len(items[index])
                    index += 1
                if index < end:
                    return [memoryview(items[index])[sent:], *items[index + 1:]]
                continue
            position, remaining = item.position, item.length
            while remaining > 0:
                try:
                    sent = os.sendfile(fd, item.fileno(), position, remaining)
                except BlockingIOError:
                    sent = -1
                if sent <= 0:   # a full socket, or a short file the writer will report
                    holder = item.file_slice if isinstance(item, _SliceRest) else item
                    return [_SliceRest(holder, position, remaining), *items[index + 1:]]
                position += sent
                remaining -= sent
            index += 1
        return None

    # ------------------------------------------------------------------------ writer task
    async def _send_responses(self, responses: list[list[Any]]):
        """Write size-prefixed responses: byte parts gathered into one sendmsg, file slices
        in between with sendfile."""
        await self._send_items(_items(responses))

    async def _send_items(self, items: list) -> None:
        buffers: list[Any] = []
        for item in items:
            if isinstance(item, _BYTES):
                buffers.append(item)
                continue
            # Not corked with MSG_MORE: when the slice ends the response, nothing would
            # uncork it (sendfile does not push), and the tail would wait ~200 ms.
            await self._send_buffers(buffers)
            buffers = []
            await self._send_file_slice(item)
        await self._send_buffers(buffers)

    async def _send_buffers(self, buffers: list[Any]):
        """sendmsg (gather write) of `buffers` until all of it is out.

        The common case, a burst that fits one writev, is tried straight on the descriptor:
        trio's sendmsg would add two scheduler round trips per burst; only a full socket
        buffer waits for writability."""
        sock = self.stream.socket
        index = 0
        while index < len(buffers):
            chunk = buffers[index:index + _MAX_IOV]
            more = index + len(chunk) < len(buffers)   # the next sendmsg follows at once
            if more:
                sent = await sock.sendmsg(chunk, (), _MSG_MORE)
            else:
                try:
                    sent = os.writev(self._fileno, chunk)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(sock)
                    continue
            for buffer in chunk:
                size = len(buffer)
                if sent < size:
                    buffers[index] = memoryview(buffer)[sent:]   # the rest of a partial write
                    break
                sent -= size
                index += 1

    async def _send_file_slice(self, file_slice):
        """Send a storage file slice with os.sendfile (zero copy), waiting for writability."""
        from broker.connection import CloseConnection

        sock = self.stream.socket
        out_fd = sock.fileno()
        in_fd, position, remaining = file_slice.fileno(), file_slice.position, file_slice.length
        while remaining > 0:
            try:
                sent = os.sendfile(out_fd, in_fd, position, remaining)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    await trio.lowlevel.wait_writable(sock)
                    continue
                raise
            if sent == 0:
                # The file is shorter than the slice (truncated under us): the client would
                # misparse a short frame, so the connection has to go.
                raise CloseConnection("file slice shorter than announced")
            position += sent
            remaining -= sent
            await trio.lowlevel.checkpoint()
