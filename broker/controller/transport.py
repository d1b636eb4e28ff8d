"""TCP transport for the metadata quorum: KRaft requests over Kafka framing between controllers.

`TcpTransport(node_id, voters={id: (host, port)}, cluster_id)`:
- `send(dest, message)` queues a core request (never blocks; a full queue drops it, as a lossy network
  would, and the core resends on its own timers). Core responses are not sent through here: the driver
  answers the request being handled through the `reply` callable it came with.
- `incoming()` yields `(src, message, reply)`: requests from peers (reply(core response or None) writes
  the wire answer) and decoded responses to our own requests (reply is None).
- `serve(listener_socket_or_port)` accepts peers and admin clients on the controller listener; requests
  that are not KRaft RPCs go to `admin_handler(header, body) -> response body` if one is set.
Each peer gets one outbound connection, reconnected with backoff; requests on it are answered in order.
Security stays outside: `connect(address)` opens an outbound connection (TLS and SASL done; default
plain TCP) and `guard` (broker.security.controller_listener) screens inbound connections and requests.
"""

from __future__ import annotations

import logging
import struct

import trio

import protocol

from . import wire

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_FRAME = 64 * 1024 * 1024
RAFT_APIS = set(wire.VERSIONS)
CONNECT_TIMEOUT_S = 10.0   # TCP, TLS handshake and SASL together


async def read_frame(stream: trio.SocketStream, buffer: bytearray) -> bytes | None:
    """One size-prefixed frame, or None at a clean end of stream."""
    while len(buffer) < 4:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        buffer += chunk
    (size,) = _SIZE.unpack_from(buffer, 0)
    if not 0 <= size <= MAX_FRAME:
        raise ValueError(f"bad frame size {size}")
    while len(buffer) < 4 + size:
        chunk = await stream.receive_some(max(65536, 4 + size - len(buffer)))
        if not chunk:
            raise ValueError("connection closed mid-frame")
        buffer += chunk
    frame = bytes(buffer[4:4 + size])
    del buffer[:4 + size]
    return frame


class TcpTransport:
    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]], cluster_id: str,
                 bind: tuple[str, int] | None = None, connect=None, guard=None):
        self.node_id = node_id
        self.connect = connect or (lambda address: trio.open_tcp_stream(*address))
        self.guard = guard
        self.voters = dict(voters)
        self.cluster_id = cluster_id
        self.bind = bind                      # where a voter listens (default: its voter address)
        self.admin_handler = None
        self.inconsistent_cluster: str | None = None   # a peer's complaint: we are not of its cluster
        self.inconsistent_cluster_event = trio.Event()
        self._inbound_send, self._inbound = trio.open_memory_channel(1024)
        self._outbound: dict[int, trio.MemorySendChannel] = {}
        self._outbound_recv: dict[int, trio.MemoryReceiveChannel] = {}
        for peer in self.voters:
            if peer != node_id:
                self._outbound[peer], self._outbound_recv[peer] = trio.open_memory_channel(256)

    # -- the driver's side -----------------------------------------------------------------------------

    def send(self, dest: int, message) -> None:
        channel = self._outbound.get(dest)
        if channel is None:
            return
        try:
            channel.send_nowait(message)
        except trio.WouldBlock:
            pass

    async def incoming(self):
        async for item in self._inbound:
            yield item

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen on our voter address (voters only) and keep one connection per voter."""
        async with trio.open_nursery() as nursery:
            for peer in self._outbound:
                nursery.start_soon(self._peer_loop, peer)
            if self.node_id not in self.voters:          # an observer only fetches
                task_status.started()
                return
            host, port = self.bind or self.voters[self.node_id]
            listeners = await trio.open_tcp_listeners(port, host=host or None)
            task_status.started()
            await trio.serve_listeners(self._serve_connection, listeners, handler_nursery=nursery)

    # -- inbound connections ---------------------------------------------------------------------------

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        from broker.security.authenticator import RequestRefused

        buffer = bytearray()
        session = None
        if self.guard is not None:
            session = await self.guard.accept(stream)
            if session is None:               # failed TLS: already logged by the guard
                await trio.aclose_forcefully(stream)
                return
            stream = session.stream
        try:
            async with stream:
                while True:
                    frame = await read_frame(stream, buffer)
                    if frame is None:
                        return
                    response = await self._answer(frame, session)
                    if response is None:
                        return
                    await stream.send_all(_SIZE.pack(len(response)) + response)
                    if session is not None and session.close_after_answer:
                        return
        except (trio.BrokenResourceError, trio.ClosedResourceError, ValueError, protocol.DecodeError,
                RequestRefused) as exc:
            log.debug("controller connection closed: %s", exc)
        except Exception:                     # a handler bug closes this connection, not the quorum
            log.exception("controller connection failed")

    async def _answer(self, frame: bytes, session=None) -> bytes | None:
        header, body = protocol.decode_request(frame)
        key, version, cid = header.api_key, header.api_version, header.correlation_id
        if session is not None:
            answer = session.screen(header, body)
            if answer is not None:
                return protocol.encode_response(key, version, cid, answer)
        if key not in RAFT_APIS:
            if self.admin_handler is None:
                return None
            return protocol.encode_response(key, version, cid, await self.admin_handler(header, body))
        if getattr(body, "cluster_id", None) not in (None, self.cluster_id):
            log.warning("refusing %s from a node of cluster %s (this quorum is cluster %s)",
                        type(body).__name__, body.cluster_id, self.cluster_id)
            return protocol.encode_response(key, version, cid, wire.inconsistent_cluster_response(key))
        try:
            src, message = wire.decode_request(key, header.client_id, body)
        except wire.WireError:
            return None
        done, answer = trio.Event(), []

        def reply(core_response) -> None:
            if not done.is_set():
                answer.append(core_response)
                done.set()
        await self._inbound_send.send((src, message, reply))
        with trio.move_on_after(5):
            await done.wait()
        if not answer or (answer[0] is None and key not in (53, 54)):
            return None
        return protocol.encode_response(key, version, cid, wire.encode_response(key, answer[0]))

    def _refused_by(self, peer: int) -> None:
        if self.inconsistent_cluster is None:
            self.inconsistent_cluster = (
                f"controller {peer} refuses cluster id {self.cluster_id} (meta.properties): this node "
                "belongs to another cluster")
            self.inconsistent_cluster_event.set()

    # -- outbound connections --------------------------------------------------------------------------

    async def _peer_loop(self, peer: int) -> None:
        host, port = self.voters[peer]
        queue = self._outbound_recv[peer]
        backoff = 0.05
        while True:
            try:
                with trio.fail_after(CONNECT_TIMEOUT_S):
                    stream = await self.connect((host, port))
            except (OSError, trio.TooSlowError) as exc:
                log.debug("cannot reach controller %d: %s", peer, exc)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            backoff = 0.05
            async with stream:
                await self._talk(peer, stream, queue)
            await trio.sleep(backoff)

    async def _talk(self, peer: int, stream: trio.SocketStream, queue) -> None:
        """Requests out in order, responses back in the same order (Kafka answers in order)."""
        pending_send, pending = trio.open_memory_channel(1024)
        buffer = bytearray()

        async def reader() -> None:
            async for correlation_id, key, version, request in pending:
                frame = await read_frame(stream, buffer)
                if frame is None:
                    raise ValueError("peer closed the connection")
                got, body = protocol.decode_response(key, version, frame)
                if got != correlation_id:
                    raise ValueError("response out of order")
                if getattr(body, "error_code", 0) == protocol.ErrorCode.INCONSISTENT_CLUSTER_ID:
                    self._refused_by(peer)
                    continue
                message = wire.decode_response(request, body)
                if message is not None:
                    await self._inbound_send.send((peer, message, None))

        async with trio.open_nursery() as nursery:
            async def reader_until_broken() -> None:
                try:
                    await reader()
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ValueError,
                        protocol.DecodeError, wire.WireError) as exc:
                    log.debug("connection to controller %d lost: %s", peer, exc)
                finally:
                    nursery.cancel_scope.cancel()
            nursery.start_soon(reader_until_broken)
            correlation_id = 0
            try:
                async for request in queue:
                    correlation_id += 1
                    key, version, client_id, body = wire.encode_request(request, self.cluster_id)
                    data = protocol.encode_request(key, version, correlation_id, client_id, body)
                    await pending_send.send((correlation_id, key, version, request))
                    await stream.send_all(_SIZE.pack(len(data)) + data)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                log.debug("connection to controller %d lost: %s", peer, exc)
                nursery.cancel_scope.cancel()
