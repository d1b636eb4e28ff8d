"""SASL: SaslHandshake (17) v0–v1, SaslAuthenticate (36) v0–v2 (KIP-43, KIP-152, KIP-368).

The exchange itself lives in ``broker.security.authenticator`` (one per connection of a SASL
listener). On a connection without SASL, or after authentication without re-authentication
enabled, both answer ILLEGAL_SASL_STATE as Kafka does.
"""

from __future__ import annotations

from protocol import ErrorCode, messages


async def handle_sasl_handshake(ctx, header, body):
    authenticator = ctx.connection.authenticator
    if authenticator is None:
        return messages.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                              mechanisms=[])
    response, close = authenticator.handshake(header.api_version, body.mechanism)
    if close:
        ctx.close_after_response()
    return response


async def handle_sasl_authenticate(ctx, header, body):
    authenticator = ctx.connection.authenticator
    if authenticator is None:
        return messages.SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"")
    response, close = authenticator.authenticate(header.api_version, body.auth_bytes)
    if close:
        ctx.close_after_response()
    return response


HANDLERS = {
    17: (0, 1, handle_sasl_handshake),
    36: (0, 2, handle_sasl_authenticate),
}
