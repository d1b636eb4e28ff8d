"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31), v0–v3: ACLs kept in the metadata log.

Like Kafka: CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE
(CLUSTER_AUTHORIZATION_FAILED otherwise); with no authorizer configured they answer
SECURITY_DISABLED. A request naming UNKNOWN (code 0) for a resource type, pattern type, operation
or permission fails Kafka's request validation, so the connection is closed. CreateAcls validates
in Kafka 3.9's three stages (tests/security/test_acl_requests_match_kafka.py compares them with the
real broker): a binding with a filter-only value (ANY, MATCH) fails the whole request with
UNKNOWN_SERVER_ERROR; a CLUSTER not named kafka-cluster or an empty name fails that binding with
INVALID_REQUEST; the controller refuses an unrecognised code (INVALID_REQUEST, "Invalid ... UNKNOWN").
Principal and host are stored as given. Changes go through the controller
(AccessControlEntryRecord / RemoveAccessControlEntryRecord), so they survive restarts and reach
every broker's image.
"""

from __future__ import annotations

from protocol import ErrorCode, messages

from broker.connection import CloseConnection
from broker.controller.errors import ApiError
from broker.security import access
from broker.security.acls import AclBinding, AclBindingFilter, AclOperation, InvalidAcl

NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_TO_DESCRIBE = "No Authorizer is configured on the broker"   # (Kafka words it so there)
CLUSTER_DENIED = "Cluster authorization failed."


def _refusal(ctx, operation: AclOperation) -> tuple[int, str] | None:
    """(error, message) when the request as a whole is refused, else None."""
    if not access.cluster_allowed(ctx, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED
    if not access.enabled(ctx):
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    return None


def _refuse_unknown(*codes: int) -> None:
    """Kafka's request parsing rejects the UNKNOWN code in any ACL field by closing the connection
    (checked against Kafka 3.9); other unrecognised codes get through and match nothing."""
    if 0 in codes:
        raise CloseConnection("ACL request contains UNKNOWN elements")


def _filter(f) -> AclBindingFilter:
    _refuse_unknown(f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)

    return AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter,
                               f.pattern_type_filter, f.principal_filter, f.host_filter,
                               f.operation, f.permission_type)


async def create_acls(ctx, header, body):
    Response = messages.CreateAclsResponse
    for c in body.creations:
        _refuse_unknown(c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)
    refused = _refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        code, message = refused
        return Response(throttle_time_ms=0, results=[
            Response.AclCreationResult(error_code=code, error_message=message)
            for _ in body.creations])
    bindings = [AclBinding.of(c.resource_type, c.resource_name, c.resource_pattern_type,
                              c.principal, c.host, c.operation, c.permission_type)
                for c in body.creations]
    if not all(b.is_constructible for b in bindings):   # Kafka fails the whole request
        return Response(throttle_time_ms=0, results=[
            Response.AclCreationResult(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=None)
            for _ in body.creations])
    results: list = [None] * len(bindings)
    valid = []
    for index, binding in enumerate(bindings):
        try:
            binding.validate_name()
            valid.append(index)
        except InvalidAcl as exc:
            results[index] = (ErrorCode.INVALID_REQUEST, str(exc))
    try:
        created = await ctx.controller.create_acls([bindings[i] for i in valid]) if valid else []
        for index, result in zip(valid, created):
            results[index] = (result.error_code, result.error_message)
    except ApiError as exc:
        for index in valid:
            results[index] = (int(exc.code), exc.message)
    return Response(throttle_time_ms=0, results=[   # Kafka: an empty message on success
        Response.AclCreationResult(error_code=code, error_message=message if code else "")
        for code, message in results])


async def describe_acls(ctx, header, body):
    Response = messages.DescribeAclsResponse
    acl_filter = _filter(body)
    refused = _refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        code, message = refused
        if code == ErrorCode.SECURITY_DISABLED:
            message = NO_AUTHORIZER_TO_DESCRIBE
        return Response(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
    grouped: dict[tuple, list] = {}
    for acl in ctx.image.acls.values():
        if acl_filter.matches(acl):
            key = (acl.resource_type, acl.resource_name, acl.pattern_type)
            grouped.setdefault(key, []).append(acl)
    resources = [
        Response.DescribeAclsResource(
            resource_type=rtype, resource_name=name, pattern_type=ptype,
            acls=[Response.AclDescription(principal=a.principal, host=a.host,
                                          operation=a.operation, permission_type=a.permission)
                  for a in sorted(acls, key=lambda a: (a.principal, a.host, a.operation,
                                                       a.permission))])
        for (rtype, name, ptype), acls in sorted(grouped.items())]
    return Response(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


async def delete_acls(ctx, header, body):
    Response = messages.DeleteAclsResponse
    filters = [_filter(f) for f in body.filters]
    refused = _refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        code, message = refused
        return Response(throttle_time_ms=0, filter_results=[
            Response.DeleteAclsFilterResult(error_code=code, error_message=message,
                                            matching_acls=[])
            for _ in body.filters])
    try:
        results = await ctx.controller.delete_acls(filters)
    except ApiError as exc:
        return Response(throttle_time_ms=0, filter_results=[
            Response.DeleteAclsFilterResult(error_code=int(exc.code), error_message=exc.message,
                                            matching_acls=[])
            for _ in body.filters])
    return Response(throttle_time_ms=0, filter_results=[
        Response.DeleteAclsFilterResult(
            error_code=r.error_code, error_message=r.error_message,
            matching_acls=[Response.DeleteAclsMatchingAcl(
                error_code=0, error_message=None, resource_type=a.resource_type,
                resource_name=a.resource_name, pattern_type=a.pattern_type,
                principal=a.principal, host=a.host, operation=a.operation,
                permission_type=a.permission) for a in r.deleted])
        for r in results])


HANDLERS = {
    29: (0, 3, describe_acls),
    30: (0, 3, create_acls),
    31: (0, 3, delete_acls),
}
