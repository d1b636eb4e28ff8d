"""Delegation token requests between a broker and the active controller, forwarded as Kafka forwards
them: the client's Create/Renew/ExpireDelegationToken inside an Envelope (58) that names the client's
principal (DefaultPrincipalData, token_authenticated included), since the controller decides by who
asked. The controller answers with the inner response inside an EnvelopeResponse.
"""

from __future__ import annotations

import ipaddress

import protocol
from protocol import messages as m
from protocol.versioned import decode_versioned, encode_versioned

from broker.controller.delegation_tokens import CreatedToken
from broker.controller.errors import ApiError
from broker.security.delegation_tokens import TokenInfo
from broker.security.principal import USER_TYPE, KafkaPrincipal

ENVELOPE, ENVELOPE_VERSION = 58, 0
CREATE, RENEW, EXPIRE = 38, 39, 40
VERSIONS = {CREATE: 3, RENEW: 2, EXPIRE: 2}
CLIENT_ID = "odradek-forwarding"


def envelope(api_key: int, body, principal: KafkaPrincipal, client_host: str) -> m.EnvelopeRequest:
    request = protocol.encode_request(api_key, VERSIONS[api_key], 0, CLIENT_ID, body)
    principal_data = m.DefaultPrincipalData(type=principal.principal_type, name=principal.name,
                                            token_authenticated=principal.token_authenticated)
    try:
        address = ipaddress.ip_address(client_host).packed
    except ValueError:
        address = b""
    return m.EnvelopeRequest(request_data=request, request_principal=encode_versioned(principal_data),
                             client_host_address=address)


def open_envelope(body) -> tuple[object, object, KafkaPrincipal]:
    """(inner header, inner body, the client's principal); raises protocol.DecodeError."""
    header, inner = protocol.decode_request(bytes(body.request_data))
    _, data = decode_versioned(m.DefaultPrincipalData, bytes(body.request_principal or b""))
    return header, inner, KafkaPrincipal(data.type, data.name, data.token_authenticated)


def envelope_response(header, response) -> m.EnvelopeResponse:
    data = protocol.encode_response(header.api_key, header.api_version, header.correlation_id,
                                    response)
    return m.EnvelopeResponse(response_data=data, error_code=0)


def open_envelope_response(api_key: int, response):
    """The inner response; raises ApiError with the envelope's error (the controller failed)."""
    if response.error_code:
        raise ApiError(response.error_code)
    _, inner = protocol.decode_response(api_key, VERSIONS[api_key], bytes(response.response_data))
    return inner


# -- the inner requests and answers ------------------------------------------------------------------

def create_request(owner, renewers, max_lifetime_ms: int):
    R = m.CreateDelegationTokenRequest
    return R(owner_principal_type=owner.principal_type, owner_principal_name=owner.name,
             renewers=[R.CreatableRenewers(principal_type=p.principal_type, principal_name=p.name)
                       for p in renewers], max_lifetime_ms=max_lifetime_ms)


def create_args(body) -> tuple[KafkaPrincipal, list[KafkaPrincipal], int]:
    owner = KafkaPrincipal(body.owner_principal_type, body.owner_principal_name)
    return owner, [KafkaPrincipal(USER_TYPE, r.principal_name) for r in body.renewers], \
        body.max_lifetime_ms


def create_response(owner, requester, created: CreatedToken):
    token = created.token
    return m.CreateDelegationTokenResponse(
        error_code=created.error_code, principal_type=owner.principal_type,
        principal_name=owner.name, token_requester_principal_type=requester.principal_type,
        token_requester_principal_name=requester.name,
        issue_timestamp_ms=token.issue_timestamp if token else 0,
        expiry_timestamp_ms=token.expiry_timestamp if token else 0,
        max_timestamp_ms=token.max_timestamp if token else 0,
        token_id=token.token_id if token else "", hmac=created.hmac)


def created_token(response, owner, requester, renewers) -> CreatedToken:
    if response.error_code:
        return CreatedToken(response.error_code)
    token = TokenInfo(response.token_id, owner, requester, tuple(renewers),
                      response.issue_timestamp_ms, response.max_timestamp_ms,
                      response.expiry_timestamp_ms)
    return CreatedToken(0, token, bytes(response.hmac))
