"""A connection on a TLS listener (SSL, SASL_SSL): the same framing as ``broker.connection``, with
bytes going through ``trio.SSLStream``.

The handshake is bounded (``ssl.handshake.timeout.ms``): a client that stalls, speaks plaintext or
fails verification is closed at once and costs one task for at most that long. Record bytes cannot
go out with sendfile under TLS (Python's ssl has no kernel TLS), so a file slice is read into one
buffer with ``preadv`` and encrypted straight from it: one kernel→user copy, no copy in Python.
"""

from __future__ import annotations

import logging
import os
import ssl
import time

import trio

from broker.connection import FIRST_READ, READ_AHEAD, Connection, CloseConnection

from .principal import KafkaPrincipal
from .principal_mapping import NoMatchingRule
from .tls import subject_name

log = logging.getLogger("odradek.security.tls")

FILE_READ_STEP = 256 * 1024   # a file slice goes out through TLS this much at a time
CIPHERTEXT_READ = 256 * 1024  # socket read size under TLS
COALESCE_BELOW = 16 * 1024    # small response parts are joined into one TLS record


class _BufferPool:
    """Ciphertext read buffers shared by the TLS connections (all on the one trio thread): a
    connection holds one only between the bytes arriving and the socket running dry. Reusing them
    spares a fresh 256 KiB allocation per burst (above malloc's mmap threshold: an mmap, a page
    fault per 4 KiB on first use, an munmap)."""

    def __init__(self, size: int, keep: int):
        self.size, self.keep = size, keep
        self._free: list[bytearray] = []

    def take(self) -> bytearray:
        return self._free.pop() if self._free else bytearray(self.size)

    def give(self, buffer: bytearray) -> None:
        if len(self._free) < self.keep:
            self._free.append(buffer)


_CIPHERTEXT_BUFFERS = _BufferPool(CIPHERTEXT_READ, keep=16)   # at most 4 MiB kept


class TlsConnection(Connection):
    def __init__(self, broker, stream: trio.SocketStream, listener_name: str, security):
        super().__init__(broker, stream, listener_name, security)
        self.security = security
        self.tls = trio.SSLStream(stream, security.ssl_context, server_side=True)
        self._ciphertext: bytearray | None = None

    async def serve(self):
        if await self._handshake():
            await super().serve()
        else:
            self.closed = True

    async def _handshake(self) -> bool:
        audit = self.broker.auth_audit
        listener = self.listener_name
        with trio.move_on_after(self.security.handshake_timeout_s):
            try:
                await self.tls.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                reason = getattr(exc.__cause__, "reason", None) or str(exc.__cause__ or exc)
                audit.failed(listener, self.peer, None, f"TLS handshake failed: {reason}")
                return False
            if self.authenticator is None:   # SSL: the certificate decides who this is
                try:
                    self.set_principal(self._certificate_principal())
                except NoMatchingRule as exc:
                    audit.failed(listener, self.peer, None, str(exc))
                    return False
                audit.succeeded(listener)
            return True
        audit.failed(listener, self.peer, None, "TLS handshake timed out")
        return False

    def _certificate_principal(self):
        certificate = self.tls.getpeercert(binary_form=True)
        if not certificate:
            return self.principal   # no client certificate: ANONYMOUS
        return KafkaPrincipal.user(self.security.principal_mapper.name_for(
            subject_name(certificate)))

    # ------------------------------------------------------------------------------ reading
    async def _receive_more(self, need: int) -> bool:
        if self._start == self._end:   # drained: an idle connection keeps only a small buffer
            self._chunk, self._start, self._end = None, 0, 0
        chunk = self._chunk
        if chunk is None:
            chunk = self._replace_chunk(max(need, FIRST_READ))
        elif self._start + need > len(chunk):
            chunk = self._replace_chunk(max(need, READ_AHEAD))
        with memoryview(chunk) as view:
            received = await self._recv_into(view[self._end:])
        if not received:
            return False
        self._end += received
        self.last_activity = time.monotonic()
        return True

    async def _recv_into(self, buffer) -> int:
        """Decrypt straight into `buffer`; 0 at the end of the stream.

        After the handshake, reads bypass SSLStream's receive path (a new bytes object per TLS
        record, 64 KiB socket reads): ciphertext goes from the socket into the stream's own memory
        BIO in large reads and plaintext from OpenSSL into our frame buffers. Writes stay with
        SSLStream; with renegotiation off (TLS 1.3, OP_NO_RENEGOTIATION) a write never needs a read,
        so the two never contend for the socket.
        """
        tls_object, incoming = self.tls._ssl_object, self.tls._incoming
        buffer = memoryview(buffer)   # slices below must write into the caller's memory
        size = len(buffer)
        while True:
            got = 0
            try:   # every record already received, not just one: fewer trips through the caller
                while got < size:
                    read = tls_object.read(size - got, buffer[got:])
                    if not read:   # the peer's close_notify: the end of the stream
                        return got
                    got += read
                return got
            except ssl.SSLWantReadError:
                if got:
                    return got
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return got
            if self._ciphertext is None:
                self._ciphertext = _CIPHERTEXT_BUFFERS.take()
            try:
                received = os.readv(self._fileno, [self._ciphertext])
            except BlockingIOError:
                # a waiting connection holds no read buffer: it goes back for the next reader
                _CIPHERTEXT_BUFFERS.give(self._ciphertext)
                self._ciphertext = None
                await trio.lowlevel.wait_readable(self.stream.socket)
                continue
            if not received:
                incoming.write_eof()
                continue
            with memoryview(self._ciphertext) as view:
                incoming.write(view[:received])

    # ------------------------------------------------------------------------------ writing
    async def _send_buffers(self, buffers):
        pending = bytearray()
        for buffer in buffers:
            if len(buffer) < COALESCE_BELOW:
                pending += buffer
                continue
            if pending:
                await self.tls.send_all(pending)
                pending = bytearray()
            await self.tls.send_all(buffer)
        if pending:
            await self.tls.send_all(pending)

    async def _send_file_slice(self, file_slice):
        in_fd, position, remaining = file_slice.fileno(), file_slice.position, file_slice.length
        buffer = bytearray(min(remaining, FILE_READ_STEP))
        view = memoryview(buffer)
        while remaining > 0:
            step = min(remaining, len(buffer))
            read = os.preadv(in_fd, [view[:step]], position)
            if read == 0:
                raise CloseConnection("file slice shorter than announced")
            await self.tls.send_all(view[:read])
            position += read
            remaining -= read
