"""The writing half of a client connection (``broker.connection.Connection`` mixes it in).

Responses go out strictly in request order. A writer task sends every response that is ready in one
gather write (``writev``), record file slices with ``os.sendfile``, sleeping until the oldest
unanswered request is done. A burst the runner handles without suspending it writes itself when the
writer is idle (``_write_now_or_wake``): plain bytes only, one wake-up less per burst; what one
``writev`` cannot take the writer sends before anything else.
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


class ResponseWrites:
    """Connection's writing methods (its slots, socket and writer wake-up are the connection's)."""

    async def _write_loop(self, scope: trio.CancelScope):
        slots = self._slots
        while True:
            if self._unsent is not None:   # the rest of a write the runner could not finish
                buffers, self._unsent = self._unsent, None
                await self._sending(self._send_buffers(buffers))
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

    _WRITES_INLINE = True   # the runner may writev responses itself (a TLS connection may not)

    def _write_now_or_wake(self):
        """At a burst's end: write the responses done at the head of the order straight away
        when the writer is idle and they are plain bytes; else wake the writer for them. What
        one writev cannot take (a full socket buffer) the writer sends before anything else."""
        slots = self._slots
        if not slots or not slots[0].done or self._writer_wakeup is None:
            return   # nothing to write yet, or the writer is busy (it looks again when done)
        if not self._WRITES_INLINE or self._broken:
            self._wake_writer()
            return
        for slot in slots:
            if not slot.done:
                break
            parts = slot.parts
            if parts is CLOSE or slot.close_after:
                self._wake_writer()   # closing: the writer's job
                return
            if parts is not None:
                for part in parts:
                    if type(part) not in _BYTES_TYPES:
                        self._wake_writer()   # file slices: the writer's job (sendfile)
                        return
        responses, _ = self._take_done()
        buffers: list[Any] = []
        for parts in responses:
            buffers.append(_SIZE.pack(len(parts[0]) if len(parts) == 1 else sum(map(len, parts))))
            buffers += parts
        if not buffers:
            return
        if len(buffers) > _MAX_IOV:   # more than one writev takes: the writer's loop
            self._unsent = buffers
            self._wake_writer()
            return
        try:
            sent = os.writev(self._fileno, buffers)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            log.debug("connection %s: write failed: %s", self.peer, exc)
            self._broken = True
            self._read_scope.cancel()
            return
        self.last_activity = time.monotonic()
        for index, buffer in enumerate(buffers):
            size = len(buffer)
            if sent < size:   # a full socket buffer: the writer sends the rest, first
                self._unsent = [memoryview(buffer)[sent:], *buffers[index + 1:]]
                self._wake_writer()
                return
            sent -= size
        if self._reading_done:   # no request is coming: the writer ends the connection
            self._wake_writer()

    async def _send_responses(self, responses: list[list[Any]]):
        """Write size-prefixed responses: byte parts gathered into one sendmsg, file slices
        in between with sendfile."""
        buffers: list[Any] = []
        for parts in responses:
            size = len(parts[0]) if len(parts) == 1 else sum(map(len, parts))
            buffers.append(_SIZE.pack(size))
            for part in parts:
                if isinstance(part, (bytes, bytearray, memoryview)):
                    if len(part):
                        buffers.append(part)
                    continue
                # Not corked with MSG_MORE: when the slice ends the response, nothing would
                # uncork it (sendfile does not push), and the tail would wait ~200 ms.
                await self._send_buffers(buffers)
                buffers = []
                for file_slice in (part.slices if isinstance(part, SlicedRecords) else (part,)):
                    await self._send_file_slice(file_slice)
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

