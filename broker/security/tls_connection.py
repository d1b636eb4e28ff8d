"""A connection on a TLS listener (SSL, SASL_SSL): the same framing as ``broker.connection``, with
``trio.SSLStream`` doing the handshake and OpenSSL's memory BIOs driven directly afterwards.

The handshake is bounded (``ssl.handshake.timeout.ms``): a client that stalls, speaks plaintext or
fails verification is closed at once and costs one task for at most that long. Reads decrypt
straight into the frame buffers; writes go through ``tls_writer`` (record bytes cannot go out with
sendfile under TLS: there, a file slice is read into a reusable buffer with ``preadv`` and encrypted
from it in full TLS records).
"""

from __future__ import annotations

import logging
import os
import ssl
import struct
import time

import trio

from broker.connection import FIRST_READ, READ_AHEAD, Connection

from .buffer_pool import BufferPool
from .principal import KafkaPrincipal
from .principal_mapping import NoMatchingRule
from .tls import subject_name
from .tls_writer import TlsWriter

log = logging.getLogger("odradek.security.tls")

_SIZE = struct.Struct(">i")

CIPHERTEXT_READ = 256 * 1024  # socket read size under TLS

# Ciphertext read buffers: a connection holds one only between the bytes arriving and the socket
# running dry.
_CIPHERTEXT_BUFFERS = BufferPool(CIPHERTEXT_READ, keep=16)   # at most 4 MiB kept


class TlsConnection(Connection):
    writes_inline = False   # every write goes through TlsWriter (encrypted), never the bare socket

    def __init__(self, broker, stream: trio.SocketStream, listener_name: str, security):
        super().__init__(broker, stream, listener_name, security)
        self.security = security
        self.tls = trio.SSLStream(stream, security.ssl_context, server_side=True)
        self._ciphertext: bytearray | None = None
        self._writer: TlsWriter | None = None   # after the handshake: every response goes through it

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
                self._take_over_writes()
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
    def _take_over_writes(self):
        """From here on responses go through TlsWriter, not SSLStream (see tls_writer)."""
        held_back, self.tls._delayed_outgoing = self.tls._delayed_outgoing or b"", None
        self._writer = TlsWriter(self.tls._ssl_object, self.tls._outgoing, self.stream.socket,
                                 held_back)

    async def _send_responses(self, responses):
        """Size-prefixed responses, encrypted together: a burst fills whole TLS records."""
        parts: list = []
        for response in responses:
            parts.append(_SIZE.pack(sum(len(part) for part in response)))
            parts.extend(response)
        await self._writer.send(parts)

    # Never the plaintext socket writes of the base class.
    async def _send_buffers(self, buffers):
        await self._writer.send(buffers)

    async def _send_file_slice(self, file_slice):
        await self._writer.send((file_slice,))
