"""CreateDelegationToken (38) v0-v3, RenewDelegationToken (39) v0-v2, ExpireDelegationToken (40)
v0-v2, DescribeDelegationToken (41) v0-v3 (KIP-48, KIP-373, KIP-900).

The broker decides who may ask; the controller decides the rest (``controller.delegation_tokens``)
and keeps tokens in the metadata log, which answers Describe here. Tokens are managed only over an
authenticated connection that did not itself log in with a token: a PLAINTEXT listener, TLS without
a client certificate or a token session gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. Errors the broker
answers carry -1 timestamps, the controller's 0, as in Kafka.
"""

from __future__ import annotations

from protocol import ErrorCode, messages

from broker.controller.errors import ApiError
from broker.security import access
from broker.security.acls import AclOperation, ResourceType
from broker.security.delegation_tokens import token_hmac, token_secret_key
from broker.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal


def token_requests_allowed(ctx) -> bool:
    principal = ctx.principal
    if principal.token_authenticated:
        return False
    protocol = next((l.security_protocol for l in ctx.config.listeners
                     if l.name == ctx.connection.listener_name), "PLAINTEXT")
    return protocol != "PLAINTEXT" and not (protocol == "SSL" and principal == ANONYMOUS)


async def handle_create(ctx, header, body):
    requester = ctx.principal
    owner = requester
    if header.api_version >= 3 and body.owner_principal_name:
        owner = KafkaPrincipal(body.owner_principal_type or "", body.owner_principal_name)
    error = None
    if not token_requests_allowed(ctx):
        error = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    elif owner != requester and not access.allowed(ctx, AclOperation.CREATE_TOKENS,
                                                   ResourceType.USER, str(owner)):
        error = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    elif any(r.principal_type != USER_TYPE for r in body.renewers):
        error = ErrorCode.INVALID_PRINCIPAL_TYPE
    if error is not None:
        return _created(header.api_version, owner, requester, error, timestamp=-1)
    renewers = [KafkaPrincipal(USER_TYPE, r.principal_name) for r in body.renewers]
    try:
        created = await ctx.controller.create_delegation_token(owner, requester, renewers,
                                                              body.max_lifetime_ms)
    except ApiError as exc:
        return _created(header.api_version, owner, requester, exc.code, timestamp=0)
    if created.error_code:
        return _created(header.api_version, owner, requester, created.error_code, timestamp=0)
    token = created.token
    response = _created(header.api_version, owner, requester, ErrorCode.NONE, timestamp=0)
    response.issue_timestamp_ms = token.issue_timestamp
    response.expiry_timestamp_ms = token.expiry_timestamp
    response.max_timestamp_ms = token.max_timestamp
    response.token_id, response.hmac = token.token_id, created.hmac
    return response


def _created(version, owner, requester, error, *, timestamp: int):
    response = messages.CreateDelegationTokenResponse(
        error_code=int(error), principal_type=owner.principal_type, principal_name=owner.name,
        issue_timestamp_ms=timestamp, expiry_timestamp_ms=timestamp, max_timestamp_ms=timestamp,
        token_id="", hmac=b"")
    if version >= 3:   # the requester fields came with v3
        response.token_requester_principal_type = requester.principal_type
        response.token_requester_principal_name = requester.name
    return response


async def handle_renew(ctx, header, body):
    Response = messages.RenewDelegationTokenResponse
    if not token_requests_allowed(ctx):
        return Response(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                        expiry_timestamp_ms=-1)
    return await _change(ctx, Response, ctx.controller.renew_delegation_token, bytes(body.hmac),
                         body.renew_period_ms)


async def handle_expire(ctx, header, body):
    Response = messages.ExpireDelegationTokenResponse
    if not token_requests_allowed(ctx):
        return Response(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                        expiry_timestamp_ms=-1)
    return await _change(ctx, Response, ctx.controller.expire_delegation_token, bytes(body.hmac),
                         body.expiry_time_period_ms)


async def _change(ctx, Response, change, token_hmac_: bytes, period_ms: int):
    try:
        error, expiry = await change(ctx.principal, token_hmac_, period_ms)
    except ApiError as exc:
        error, expiry = int(exc.code), 0
    return Response(error_code=error, expiry_timestamp_ms=expiry)


async def handle_describe(ctx, header, body):
    Response = messages.DescribeDelegationTokenResponse
    if not token_requests_allowed(ctx):
        return Response(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, tokens=[])
    secret_key = token_secret_key(ctx.config)
    if not secret_key:
        return Response(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, tokens=[])
    if body.owners is not None and not body.owners:
        return Response(error_code=ErrorCode.NONE, tokens=[])
    owners = None if body.owners is None else [
        KafkaPrincipal(o.principal_type, o.principal_name) for o in body.owners]
    visible = [t for t in ctx.image.delegation_tokens.values() if _describable(ctx, owners, t)]
    return Response(error_code=ErrorCode.NONE,
                    tokens=[_described(header.api_version, t, secret_key) for t in visible])


def _describable(ctx, owners, token) -> bool:
    """Kafka's rule: among the tokens of the owners asked for (all without a list), those the
    requester owns, asked for or may renew, those it may DESCRIBE (the DelegationToken resource,
    by token id) and those of owners it has DESCRIBE_TOKENS on (the User resource)."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(ctx.principal):
        return True
    return (access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN,
                           token.token_id, log_if_denied=False)
            or access.allowed(ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER,
                              str(token.owner), log_if_denied=False))


def _described(version, token, secret_key: str):
    D = messages.DescribeDelegationTokenResponse.DescribedDelegationToken
    Renewer = messages.DescribeDelegationTokenResponse.DescribedDelegationTokenRenewer
    described = D(principal_type=token.owner.principal_type, principal_name=token.owner.name,
                  issue_timestamp=token.issue_timestamp, expiry_timestamp=token.expiry_timestamp,
                  max_timestamp=token.max_timestamp, token_id=token.token_id,
                  hmac=token_hmac(secret_key, token.token_id),
                  renewers=[Renewer(principal_type=p.principal_type, principal_name=p.name)
                            for p in token.renewers])
    if version >= 3:
        described.token_requester_principal_type = token.requester.principal_type
        described.token_requester_principal_name = token.requester.name
    return described


HANDLERS = {
    38: (0, 3, handle_create),
    39: (0, 2, handle_renew),
    40: (0, 2, handle_expire),
    41: (0, 3, handle_describe),
}
