"""The write side of a TLS connection: response bytes encrypted in full TLS records, the ciphertext
written straight to the socket.

Under TLS, record bytes cannot leave with ``sendfile``: that needs kernel TLS, which this design
cannot use (OpenSSL runs over trio's memory BIOs, and the kernel here has no ``tls`` ULP: see
bench/RESULTS-security.md). The next best thing, done here: the parts of a burst of responses are laid
out in one reusable plaintext buffer (small parts copied in, file slices read into it with
``preadv``: the one kernel→user copy a TLS send needs), each full buffer is encrypted by one
``SSLObject.write`` into 17 full 16 KiB records (the largest TLS allows, so the client decrypts few
records) and its ciphertext leaves in one ``write`` on the socket, waiting for writability only when
the socket buffer is full. Large in-memory parts are encrypted where they are, not copied.

Writes bypass ``trio.SSLStream.send_all`` (a lock, two scheduler trips and a ``send_all`` per part,
and a TLS record per part however small); the stream only does the handshake. Bytes that trio held
back at the end of a TLS 1.3 handshake (session tickets, see trio's ``_delayed_outgoing``) go out
first.
"""

from __future__ import annotations

import os
import ssl
from typing import Any, Iterable

import trio

from broker.connection import CloseConnection
from broker.connection_writes import SlicedRecords

from .buffer_pool import BufferPool

# Plaintext per SSLObject.write and socket write: 17 full 16 KiB records. Not 16: a Fetch of the
# clients' default max.partition.fetch.bytes (1 MiB of records plus ~100 bytes of headers) then goes
# out in four passes instead of four and a sliver (an extra write, client wake-up and scheduler trip:
# 5.6 socket writes per fetch with 256 KiB against 3.5, measured with strace).
STAGING_SIZE = 17 * 16 * 1024
ENCRYPT_IN_PLACE = 64 * 1024   # in-memory parts this large are encrypted without a staging copy
_BYTES = (bytes, bytearray, memoryview)

_STAGING_BUFFERS = BufferPool(STAGING_SIZE, keep=16)   # at most 4.25 MiB kept


class TlsWriter:
    def __init__(self, tls_object: ssl.SSLObject, outgoing: ssl.MemoryBIO,
                 socket: trio.socket.SocketType, held_back: bytes = b""):
        self._tls, self._outgoing = tls_object, outgoing
        self._socket, self._fileno = socket, socket.fileno()
        self._held_back = held_back

    async def send(self, parts: Iterable[Any]) -> None:
        """Encrypt and send `parts` in order: bytes-like objects, storage file slices
        (``fileno()``, ``position``, ``length``) and ``SlicedRecords``."""
        staging = _STAGING_BUFFERS.take()
        try:
            with memoryview(staging) as view:
                fill = 0
                for part in parts:
                    if isinstance(part, _BYTES):
                        fill = await self._add_bytes(view, fill, part)
                    else:
                        for file_slice in (part.slices if isinstance(part, SlicedRecords)
                                           else (part,)):
                            fill = await self._add_file_slice(view, fill, file_slice)
                if fill:
                    self._tls.write(view[:fill])
                await self._flush()
        finally:
            _STAGING_BUFFERS.give(staging)

    async def _add_bytes(self, view: memoryview, fill: int, data) -> int:
        size = len(data)
        if size >= ENCRYPT_IN_PLACE:   # encrypted where it is, a buffer's worth at a time
            if fill:
                self._tls.write(view[:fill])
            with memoryview(data) as source:
                for start in range(0, size, STAGING_SIZE):
                    self._tls.write(source[start:start + STAGING_SIZE])
                    await self._flush()
            return 0
        end = fill + size
        if end <= len(view):
            view[fill:end] = data
            return end
        # top the buffer up to full records, send it, keep the rest of `data` (it fits)
        room = len(view) - fill
        with memoryview(data) as source:
            view[fill:] = source[:room]
            self._tls.write(view)
            view[:size - room] = source[room:]
        await self._flush()
        return size - room

    async def _add_file_slice(self, view: memoryview, fill: int, file_slice) -> int:
        fd, position, remaining = file_slice.fileno(), file_slice.position, file_slice.length
        while remaining > 0:
            if fill == len(view):
                self._tls.write(view)
                await self._flush()
                fill = 0
            step = min(remaining, len(view) - fill)
            read = os.preadv(fd, [view[fill:fill + step]], position)
            if read == 0:
                # The file is shorter than the slice (truncated under us): the client would
                # misparse a short frame, so the connection has to go.
                raise CloseConnection("file slice shorter than announced")
            fill += read
            position += read
            remaining -= read
        return fill

    async def _flush(self) -> None:
        """Send every ciphertext byte OpenSSL has produced so far."""
        ciphertext = self._outgoing.read()
        if self._held_back:
            ciphertext, self._held_back = self._held_back + ciphertext, b""
        if ciphertext:
            with memoryview(ciphertext) as view:
                sent, size = 0, len(view)
                while sent < size:
                    try:
                        sent += os.write(self._fileno, view[sent:])
                    except BlockingIOError:
                        await trio.lowlevel.wait_writable(self._socket)
        # one scheduler pass per buffer: a large Fetch response does not hold the event loop
        await trio.lowlevel.checkpoint()
