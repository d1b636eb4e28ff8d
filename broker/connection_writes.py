"""The writing half of a client connection (``broker.connection.Connection`` mixes it in).

Responses go out strictly in request order. A writer task sends every response that is ready in one
gather write (``writev``), record file slices with ``os.sendfile``, sleeping until the oldest
unanswered request is done. Whoever finishes the response at the head of the order while the writer
sleeps (the runner at the end of a straight burst, a long poll or an acks=all produce when its wait
ends) writes it at once, as far as the socket takes it without waiting (``_write_now_or_wake``):
waking the writer would cost a scheduler pass per response, which on a busy loop is a good part of a
replica round trip. What the socket does not take the writer sends before anything else.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import struct
import time
from typing import Any

import trio

log = logging.getLogger("odradek.connection")

_SIZE = struct.Struct(">i")
_MAX_IOV = 512                                 # buffers per sendmsg, well under IOV_MAX (1024)
_MSG_MORE = getattr(socket, "MSG_MORE", 0)
_BYTES_TYPES = (bytes, bytearray, memoryview)
CLOSE = object()   # a slot's parts when the connection closes instead of answering


class SlicedRecords:
    """A Fetch ``records`` value made of storage file slices, sent with os.sendfile."""

    __slots__ = ("slices", "_size")

    def __init__(self, slices):
        self.slices = list(slices)
        self._size = sum(len(s) for s in self.slices)

    def __len__(self):
        return self._size


class _SliceRest:
    """The part of a file slice an inline write did not get out (the writer sends it)."""

    __slots__ = ("file_slice", "position", "length")

    def __init__(self, file_slice, position: int, length: int):
        self.file_slice = file_slice   # keeps the slice's file open meanwhile
        self.position, self.length = position, length

    def fileno(self) -> int:
        return self.file_slice.fileno()

    def __len__(self):
        return self.length


def _items(responses: list[list[Any]]) -> list[Any]:
    """Size-prefixed responses as one flat list of byte parts and file slices, in order."""
    items: list[Any] = []
    for parts in responses:
        items.append(_SIZE.pack(len(parts[0]) if len(parts) == 1 else sum(map(len, parts))))
        for part in parts:   # (an empty part costs writev nothing: not worth a check per part)
            if type(part) is SlicedRecords:
                items += part.slices
            else:
                items.append(part)
    return items


class ResponseWrites:
    """Connection's writing methods (its slots, socket and writer wake-up are the connection's)."""

    async def _write_loop(self, scope: trio.CancelScope):
        slots = self._slots
        while True:
            if self._unsent is not None:   # the rest of an inline write: before anything else
                items, self._unsent = self._unsent, None
                await self._sending(self._send_items(items))
                continue
            if not slots or not slots[0].done:
                if not slots and self._reading_done:
                    break
                self._writer_wakeup = trio.Event()
                await self._writer_wakeup.wait()
                continue
            responses, close = self._take_done()
            if responses and not self._broken:
                await self._sending(self._send_responses(responses))
            if close:
                break
        scope.cancel()   # every response is out and no request is coming (or closing): done

    def _take_done(self) -> tuple[list, bool]:
        """The responses done at the head of the order (clients pipeline: all of them go out in
        one write, one syscall per burst), and whether the connection closes after them."""
        slots = self._slots
        ready = [slots.popleft()]
        while slots and slots[0].done:
            ready.append(slots.popleft())
        if self._room is not None:
            self._room.set()
            self._room = None
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
        return responses, close

    async def _sending(self, send):
        """Await a send; a failed one breaks the connection (requests in flight still finish)."""
        try:
            await send
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.debug("connection %s: write failed: %s", self.peer, exc)
            self._broken = True
            self._read_scope.cancel()
        else:
            self.last_activity = time.monotonic()

    _WRITES_INLINE = True   # responses may be written by whoever finishes them (TLS may not)

    def _write_now_or_wake(self):
        """A response at the head of the order is done: write the responses done there straight
        away when the writer is idle, as far as the socket takes them without waiting (what it
        does not take, the writer sends before anything else); else wake the writer, or leave
        it be when it is busy (it looks again when done)."""
        slots = self._slots
        if not slots or not slots[0].done or self._writer_wakeup is None:
            return
        if not self._WRITES_INLINE or self._broken:
            self._wake_writer()
            return
        for slot in slots:
            if not slot.done:
                break
            if slot.parts is CLOSE or slot.close_after:
                self._wake_writer()   # closing: the writer's job
                return
        responses, _ = self._take_done()
        if responses:
            try:
                rest = self._write_items_now(_items(responses))
            except OSError as exc:
                log.debug("connection %s: write failed: %s", self.peer, exc)
                self._broken = True
                self._read_scope.cancel()   # a reader still running ends and wakes the writer
            else:
                self.last_activity = time.monotonic()
                if rest:
                    self._unsent = rest
                    self._wake_writer()
                    return
        if self._reading_done:   # no request is coming: the writer ends the connection
            self._wake_writer()

    def _write_items_now(self, items: list[Any]) -> list[Any]:
        """Write `items` (byte parts and file slices) without waiting; what the socket did not
        take is returned, in order."""
        fileno, index, count = self._fileno, 0, len(items)
        while index < count:
            item = items[index]
            if not isinstance(item, _BYTES_TYPES):   # a file slice: zero copy
                position, length = item.position, len(item)
                try:
                    sent = os.sendfile(fileno, item.fileno(), position, length)
                except BlockingIOError:
                    sent = 0
                if sent < length:   # a full socket (or a short file: the writer finds out)
                    return [_SliceRest(item, position + sent, length - sent), *items[index + 1:]]
                index += 1
                continue
            end = index + 1
            while end < count and end - index < _MAX_IOV and type(items[end]) in _BYTES_TYPES:
                end += 1
            chunk = items[index:end] if end - index < count else items
            try:
                sent = os.writev(fileno, chunk)
            except BlockingIOError:
                return items[index:]
            for buffer in chunk:
                size = len(buffer)
                if sent < size:   # a full socket buffer
                    return [memoryview(buffer)[sent:], *items[index + 1:]]
                sent -= size
                index += 1
        return []

    async def _send_responses(self, responses: list[list[Any]]):
        """Write size-prefixed responses (the writer's path; TLS connections override it)."""
        await self._send_items(_items(responses))

    async def _send_items(self, items: list[Any]):
        """Byte parts gathered into one writev, file slices in between with sendfile."""
        buffers: list[Any] = []
        for item in items:
            if isinstance(item, _BYTES_TYPES):
                buffers.append(item)
                continue
            # Not corked with MSG_MORE: when the slice ends the response, nothing would
            # uncork it (sendfile does not push), and the tail would wait ~200 ms.
            if buffers:
                await self._send_buffers(buffers)
                buffers = []
            await self._send_file_slice(item)
        if buffers:
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
                from broker.connection import CloseConnection   # (it imports this module)
                raise CloseConnection("file slice shorter than announced")
            position += sent
            remaining -= sent
            await trio.lowlevel.checkpoint()

