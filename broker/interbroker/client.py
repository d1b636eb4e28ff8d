"""One reusable connection per destination broker; requests go out in order, answers come back in order.

Kafka brokers answer a connection's requests strictly in order, so a connection is a queue: each
request gets a correlation id and waits for its own answer. A connection that fails or lets a request
time out is dropped (later answers could no longer be matched) and the next request reconnects.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field

import trio

import protocol

from broker.security.streams import open_stream

log = logging.getLogger("odradek.interbroker")

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 100 * 1024 * 1024
CONNECT_TIMEOUT_S = 10.0   # TCP, TLS handshake and SASL together


class PeerUnavailable(Exception):
    """The destination broker is unknown, unreachable, or did not answer in time."""


def inter_broker_listener_name(config) -> str | None:
    """Kafka's choice: `inter.broker.listener.name`, else the listener whose security protocol is
    `security.inter.broker.protocol`, else the first client listener."""
    explicit = config["inter.broker.listener.name"]
    if explicit:
        return explicit.upper()
    listeners = config.client_listeners
    wanted = (config["security.inter.broker.protocol"] or "PLAINTEXT").upper()
    for listener in listeners:
        if listener.security_protocol.upper() == wanted:
            return listener.name
    return listeners[0].name if listeners else None


def endpoint_of(image, node_id: int, listener_name: str | None):
    """(host, port) of a registered broker's listener, or None."""
    broker = image.brokers.get(node_id)
    if broker is None:
        return None
    for endpoint in broker.endpoints:
        if listener_name is None or endpoint.name == listener_name:
            return endpoint.host, endpoint.port
    return None


@dataclass(eq=False)
class _Connection:
    address: tuple[str, int]
    stream: trio.abc.Stream
    send_lock: trio.Lock = field(default_factory=trio.Lock)
    waiting: dict = field(default_factory=dict)   # correlation id -> (event, [frame])
    order: list = field(default_factory=list)     # correlation ids in send order
    buffer: bytearray = field(default_factory=bytearray)
    read_lock: trio.Lock = field(default_factory=trio.Lock)
    broken: bool = False


class BrokerClient:
    def __init__(self, broker, client_id: str | None = None):
        self.broker = broker
        self.client_id = client_id or f"odradek-broker-{broker.node_id}"
        self.listener_name = inter_broker_listener_name(broker.config)
        self._connections: dict[int, _Connection] = {}
        self._connecting: dict[int, trio.Lock] = {}
        self._next_correlation = 0

    async def request(self, node_id: int, api_key: int, version: int, body, *, timeout: float = 30.0):
        """Send one request to broker `node_id`; its decoded response body."""
        with trio.move_on_after(timeout) as scope:
            connection = await self._connection(node_id)
            self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
            correlation_id = self._next_correlation
            frame = protocol.encode_request(api_key, version, correlation_id, self.client_id, body)
            try:
                answer = await self._exchange(connection, correlation_id, frame)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ValueError) as exc:
                await self._drop(node_id, connection)
                raise PeerUnavailable(f"broker {node_id}: {exc}") from None
            try:
                got, response = protocol.decode_response(api_key, version, answer)
            except protocol.DecodeError as exc:
                await self._drop(node_id, connection)
                raise PeerUnavailable(f"broker {node_id} sent an unreadable answer: {exc}") from None
            return response
        # timed out: the answer may still come, and would be read as another request's
        connection = self._connections.get(node_id)
        if connection is not None and scope.cancelled_caught:
            await self._drop(node_id, connection)
        raise PeerUnavailable(f"broker {node_id} did not answer within {timeout}s")

    async def _connection(self, node_id: int) -> _Connection:
        address = endpoint_of(self.broker.image, node_id, self.listener_name)
        if address is None:
            raise PeerUnavailable(f"broker {node_id} has no {self.listener_name} endpoint in the metadata")
        lock = self._connecting.setdefault(node_id, trio.Lock())
        async with lock:
            connection = self._connections.get(node_id)
            if connection is not None and not connection.broken and connection.address == address:
                return connection
            if connection is not None:
                await self._drop(node_id, connection)
            try:
                with trio.fail_after(CONNECT_TIMEOUT_S):
                    stream = await open_stream(address, getattr(self.broker, "inter_broker_security",
                                                                None), self.client_id)
            except (OSError, trio.TooSlowError) as exc:
                raise PeerUnavailable(f"broker {node_id} at {address[0]}:{address[1]}: {exc}") from None
            connection = _Connection(address, stream)
            self._connections[node_id] = connection
            return connection

    async def _exchange(self, connection: _Connection, correlation_id: int, frame: bytes) -> bytes:
        done, box = trio.Event(), []
        connection.waiting[correlation_id] = (done, box)
        async with connection.send_lock:
            connection.order.append(correlation_id)
            await connection.stream.send_all(_SIZE.pack(len(frame)) + frame)
        # Whoever holds the read lock reads answers in order and hands each to its waiter.
        while not done.is_set():
            async with connection.read_lock:
                if done.is_set():
                    break
                answer = await _read_frame(connection.stream, connection.buffer)
                expected = connection.order.pop(0)
                (got,) = _SIZE.unpack_from(answer, 0)
                if got != expected:
                    raise ValueError(f"answer {got} arrived where {expected} was due")
                waiter = connection.waiting.pop(expected, None)
                if waiter is not None:
                    waiter[1].append(answer)
                    waiter[0].set()
        return box[0]

    async def _drop(self, node_id: int, connection: _Connection) -> None:
        connection.broken = True
        if self._connections.get(node_id) is connection:
            del self._connections[node_id]
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(connection.stream)

    async def aclose(self) -> None:
        for node_id, connection in list(self._connections.items()):
            await self._drop(node_id, connection)


async def _read_frame(stream: trio.SocketStream, buffer: bytearray) -> bytes:
    while len(buffer) < 4:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise ValueError("connection closed")
        buffer += chunk
    (size,) = _SIZE.unpack_from(buffer, 0)
    if not 0 <= size <= MAX_RESPONSE_BYTES:
        raise ValueError(f"bad response size {size}")
    while len(buffer) < 4 + size:
        chunk = await stream.receive_some(max(65536, 4 + size - len(buffer)))
        if not chunk:
            raise ValueError("connection closed mid-response")
        buffer += chunk
    frame = bytes(buffer[4:4 + size])
    del buffer[:4 + size]
    return frame
