"""A broker's Kafka-protocol client for the active controller, over the controller listener.

``ControllerClient(endpoints, leader_id, client_id)``: ``await client.call(api_key, version, body)``
sends one request to whichever controller currently leads (``leader_id()``, looked up in
``endpoints()``: {id: (host, port)}) and returns the decoded response body. It retries, until its
deadline, while no leader is known, the connection fails, or the answer says NOT_CONTROLLER anywhere
(the leadership moved: the next attempt goes to the new one), so callers see one answer from the
active controller or ``ApiError(REQUEST_TIMED_OUT)``.
"""

from __future__ import annotations

import logging
import struct
from typing import Callable

import trio

import protocol
from protocol import ErrorCode
from protocol.body import Body

from broker.controller.errors import ApiError
from broker.security.streams import open_stream

log = logging.getLogger("odradek.cluster")

_SIZE = struct.Struct(">i")
RETRY_BACKOFF_S = 0.05


def mentions_not_controller(body) -> bool:
    """Whether any error code in the response (top level or per item) is NOT_CONTROLLER."""
    if isinstance(body, list):
        return any(mentions_not_controller(item) for item in body)
    if not isinstance(body, Body):
        return False
    for name in body.__slots__:
        value = getattr(body, name)
        if name == "error_code" and value == ErrorCode.NOT_CONTROLLER:
            return True
        if isinstance(value, (Body, list)) and mentions_not_controller(value):
            return True
    return False


class _Connection:
    """One connection to one controller; requests strictly one at a time."""

    def __init__(self, node_id: int, stream: trio.abc.Stream):
        self.node_id = node_id
        self.stream = stream
        self.lock = trio.Lock()
        self.correlation_id = 0
        self.buffer = bytearray()

    async def call(self, api_key: int, version: int, client_id: str, body):
        from broker.controller.transport import read_frame

        async with self.lock:
            self.correlation_id += 1
            data = protocol.encode_request(api_key, version, self.correlation_id, client_id, body)
            await self.stream.send_all(_SIZE.pack(len(data)) + data)
            frame = await read_frame(self.stream, self.buffer)
            if frame is None:
                raise ConnectionError("controller closed the connection")
            correlation_id, response = protocol.decode_response(api_key, version, frame)
            if correlation_id != self.correlation_id:
                raise ConnectionError("response out of order")
            return response


class ControllerClient:
    def __init__(self, endpoints: Callable[[], dict[int, tuple[str, int]]],
                 leader_id: Callable[[], int], client_id: str, timeout_s: float = 30.0,
                 security=None):
        self._endpoints = endpoints
        self._security = security   # ClientSecurity of the controller listener (None: PLAINTEXT)
        self._leader_id = leader_id
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._connections: dict[int, _Connection] = {}
        self._leader_changed = trio.Event()

    def leader_changed(self) -> None:
        """The quorum learnt of a new leader: wake requests waiting for one."""
        self._leader_changed.set()
        self._leader_changed = trio.Event()

    async def call(self, api_key: int, version: int, body, *, timeout_s: float | None = None):
        with trio.move_on_after(timeout_s or self.timeout_s):
            while True:
                leader = self._leader_id()
                address = self._endpoints().get(leader) if leader >= 0 else None
                if address is None:
                    with trio.move_on_after(0.5):
                        await self._leader_changed.wait()
                    continue
                try:
                    connection = await self._connect(leader, address)
                    response = await connection.call(api_key, version, self.client_id, body)
                except (OSError, ConnectionError, ValueError, trio.BrokenResourceError,
                        trio.ClosedResourceError, trio.TooSlowError, protocol.DecodeError) as exc:
                    log.debug("request %d to controller %d failed: %s", api_key, leader, exc)
                    await self._drop(leader)
                    await trio.sleep(RETRY_BACKOFF_S)
                    continue
                if mentions_not_controller(response):
                    with trio.move_on_after(0.5):   # wait for news of the new leader
                        await self._leader_changed.wait()
                    continue
                return response
        raise ApiError(ErrorCode.REQUEST_TIMED_OUT,
                       "No active controller answered in time; the metadata quorum is unavailable.")

    async def _connect(self, node_id: int, address: tuple[str, int]) -> _Connection:
        connection = self._connections.get(node_id)
        if connection is None:
            with trio.fail_after(5):
                stream = await open_stream(address, self._security, self.client_id)
            connection = self._connections[node_id] = _Connection(node_id, stream)
        return connection

    async def _drop(self, node_id: int) -> None:
        connection = self._connections.pop(node_id, None)
        if connection is not None:
            await trio.aclose_forcefully(connection.stream)

    async def aclose(self) -> None:
        for node_id in list(self._connections):
            await self._drop(node_id)
