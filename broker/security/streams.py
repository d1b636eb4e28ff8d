"""Odradek's own connections to other nodes (replica fetchers, inter-broker requests, the
controller client, the quorum's peers), secured as the listener they reach is.

``inter_broker_security(config)`` and ``controller_security(config)`` say how this node connects
to another node's inter-broker / controller listener (None: PLAINTEXT, nothing to do; a
``ClientSecurity`` otherwise, from that listener's own ``ssl.*`` and SASL settings, as Kafka's
brokers do). ``await open_stream(address, security, client_id)`` connects, does the TLS
handshake (checking the peer's host name when ``ssl.endpoint.identification.algorithm=https``)
and the SASL exchange, and returns a trio stream ready for Kafka requests; it raises OSError
when the peer cannot be reached, ConnectionError when its TLS handshake or SASL refuses us.
"""

from __future__ import annotations

import struct

import trio

import protocol
from broker.config import Listener

from .client import ClientSecurity, broker_client_security
from .sasl import AuthenticationFailed

_SIZE = struct.Struct(">i")
# SaslHandshake v1 (then KIP-152 SaslAuthenticate frames) and SaslAuthenticate v1 (session
# lifetime): what every broker since Kafka 1.0 speaks.
_SASL_VERSIONS = {17: 1, 36: 1}
MAX_SASL_RESPONSE = 1 << 20


def inter_broker_listener(config) -> Listener | None:
    """This node's inter-broker listener (``inter.broker.listener.name``, else the listener of
    ``security.inter.broker.protocol``, else the first client listener)."""
    from broker.interbroker.client import inter_broker_listener_name

    name = inter_broker_listener_name(config)
    return next((l for l in config.client_listeners if l.name == name), None)


def controller_listener(config) -> Listener | None:
    """The controller listener as a client sees it: a broker-only node does not listen on it,
    so its security protocol comes from ``listener.security.protocol.map``."""
    own = config.controller_listener
    if own is not None:
        return own
    names = config.controller_listener_names
    if not names:
        return None
    return Listener(names[0], config.protocol_map.get(names[0], "PLAINTEXT"), "", 0)


def _security_for(config, listener: Listener | None, mechanism_key: str) -> ClientSecurity | None:
    if listener is None or listener.security_protocol == "PLAINTEXT":
        return None
    return broker_client_security(config, listener, mechanism_key)


def inter_broker_security(config) -> ClientSecurity | None:
    return _security_for(config, inter_broker_listener(config),
                         "sasl.mechanism.inter.broker.protocol")


def controller_security(config) -> ClientSecurity | None:
    return _security_for(config, controller_listener(config), "sasl.mechanism.controller.protocol")


async def open_stream(address: tuple[str, int], security: ClientSecurity | None,
                      client_id: str) -> trio.abc.Stream:
    host, port = address
    stream = await trio.open_tcp_stream(host, port)
    if security is None:
        return stream
    try:
        if security.ssl_context is not None:
            stream = trio.SSLStream(stream, security.ssl_context, server_hostname=host)
            await stream.do_handshake()
        if security.mechanism:
            await _authenticate(stream, security, client_id)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        await trio.aclose_forcefully(stream)
        raise ConnectionError(f"{host}:{port}: {exc.__cause__ or exc}") from None
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise
    return stream


async def _authenticate(stream, security: ClientSecurity, client_id: str) -> None:
    exchange = security.sasl_exchange()
    correlation_id = 0
    buffer = bytearray()
    try:
        api_key, body = next(exchange)
        while True:
            correlation_id += 1
            version = _SASL_VERSIONS[api_key]
            data = protocol.encode_request(api_key, version, correlation_id, client_id, body)
            await stream.send_all(_SIZE.pack(len(data)) + data)
            frame = await _read_frame(stream, buffer)
            got, response = protocol.decode_response(api_key, version, frame)
            if got != correlation_id:
                raise ConnectionError("SASL answer out of order")
            api_key, body = exchange.send(response)
    except StopIteration:
        return
    except AuthenticationFailed as exc:
        raise ConnectionError(f"SASL authentication failed: {exc}") from None
    except protocol.DecodeError as exc:
        raise ConnectionError(f"unreadable SASL answer: {exc}") from None


async def _read_frame(stream, buffer: bytearray) -> bytes:
    while len(buffer) < 4 or len(buffer) < 4 + _SIZE.unpack_from(buffer, 0)[0]:
        if len(buffer) >= 4 and not 0 <= _SIZE.unpack_from(buffer, 0)[0] <= MAX_SASL_RESPONSE:
            raise ConnectionError("oversized SASL answer")
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise ConnectionError("the peer closed the connection during authentication")
        buffer += chunk
    (size,) = _SIZE.unpack_from(buffer, 0)
    frame = bytes(buffer[4:4 + size])
    del buffer[:4 + size]
    return frame
