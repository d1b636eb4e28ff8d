"""A broker-to-broker connection for replica fetches: Kafka requests one at a time, answers decoded.

Records in a decoded Fetch response are views into its frame, appended to the follower's log without
another copy. On a PLAINTEXT channel a large frame is read straight into a warm buffer from the
broker's pool (``broker.frame_buffers``), which takes it back at the next call (the fetcher lets go
of a response before it sends the next request); otherwise it is gathered once (one join of the
received chunks).
"""

from __future__ import annotations

import struct

import trio

import protocol

from broker.frame_buffers import FrameBuffers, rounded
from broker.security.streams import open_stream

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 1 << 30
LARGE_FRAME = 65536   # frames above this are read into a pooled buffer (PLAINTEXT channels)


class ChannelError(Exception):
    """The connection failed or answered nonsense: reconnect and try again."""


class BrokerChannel:
    def __init__(self, address: tuple[str, int], client_id: str, connect_timeout_s: float = 10.0,
                 security=None, buffers: FrameBuffers | None = None):
        self.address = address
        self.security = security   # ClientSecurity of the inter-broker listener (None: PLAINTEXT)
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self._stream: trio.abc.Stream | None = None
        self._correlation_id = 0
        self._pending = bytearray()
        self._buffers = buffers
        self._lent: memoryview | None = None   # the last pooled frame: given back at the next read

    async def call(self, api_key: int, version: int, body):
        try:
            if self._stream is None:
                with trio.fail_after(self.connect_timeout_s):
                    self._stream = await open_stream(self.address, self.security, self.client_id)
                self._pending = bytearray()
            self._correlation_id += 1
            data = protocol.encode_request(api_key, version, self._correlation_id, self.client_id, body)
            await self._stream.send_all(_SIZE.pack(len(data)) + data)
            frame = await self._read_frame()
            correlation_id, response = protocol.decode_response(api_key, version, frame)
        except (OSError, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError,
                protocol.DecodeError) as exc:
            await self.aclose()
            raise ChannelError(f"{self.address[0]}:{self.address[1]}: {exc}") from exc
        if correlation_id != self._correlation_id:
            await self.aclose()
            raise ChannelError("response out of order")
        return response

    async def _read_frame(self) -> bytes | memoryview:
        if self._lent is not None:
            lent, self._lent = self._lent, None
            self._buffers.give_back(lent)
        stream = self._stream
        pending = self._pending
        while len(pending) < 4:
            chunk = await stream.receive_some(65536)
            if not chunk:
                raise trio.BrokenResourceError("connection closed")
            pending += chunk
        (size,) = _SIZE.unpack_from(pending, 0)
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise protocol.DecodeError(f"bad frame size {size}")
        sock = getattr(stream, "socket", None)   # (a TLS channel has none: it gathers chunks)
        if (self._buffers is not None and sock is not None and LARGE_FRAME < size
                and size <= self._buffers.largest_kept):
            return await self._read_into_pooled(sock, size)
        chunks = [bytes(pending[4:4 + size])]
        have = len(chunks[0])
        rest = pending[4 + size:]
        while have < size:
            chunk = await stream.receive_some(max(65536, min(size - have, 1 << 22)))
            if not chunk:
                raise trio.BrokenResourceError("connection closed mid-frame")
            if have + len(chunk) > size:
                rest = bytearray(chunk[size - have:])
                chunk = chunk[:size - have]
            chunks.append(chunk)
            have += len(chunk)
        self._pending = bytearray(rest)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _read_into_pooled(self, sock, size: int) -> memoryview:
        """The frame of `size` bytes (its prefix in _pending) read with recv_into straight into a
        pooled buffer: no receive buffer per read and no join of the pieces."""
        buffer = self._buffers.take(size) or bytearray(rounded(size))
        pending = self._pending
        have = min(len(pending) - 4, size)
        with memoryview(buffer) as whole:
            whole[:have] = pending[4:4 + have]
            self._pending = bytearray(pending[4 + have:])
            while have < size:
                received = await sock.recv_into(whole[have:size])
                if not received:
                    raise trio.BrokenResourceError("connection closed mid-frame")
                have += received
            frame = self._lent = whole[:size]
        return frame

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await trio.aclose_forcefully(stream)
