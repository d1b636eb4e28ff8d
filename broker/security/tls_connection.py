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
import time

import trio

from broker.connection import FIRST_READ, READ_AHEAD, Connection, CloseConnection

from .principal import KafkaPrincipal
from .principal_mapping import NoMatchingRule
from .tls import subject_name

log = logging.getLogger("odradek.security.tls")

FILE_READ_STEP = 256 * 1024   # a file slice goes out through TLS this much at a time
COALESCE_BELOW = 16 * 1024    # small response parts are joined into one TLS record


class TlsConnection(Connection):
    def __init__(self, broker, stream: trio.SocketStream, listener_name: str, security):
        super().__init__(broker, stream, listener_name, security)
        self.security = security
        self.tls = trio.SSLStream(stream, security.ssl_context, server_side=True)

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
        data = await self.tls.receive_some(len(chunk) - self._end)
        if not data:
            return False
        chunk[self._end:self._end + len(data)] = data
        self._end += len(data)
        self.last_activity = time.monotonic()
        return True

    async def _recv_into(self, buffer) -> int:
        data = await self.tls.receive_some(len(buffer))
        buffer[:len(data)] = data
        return len(data)

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
