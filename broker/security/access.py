"""The authorization layer the handlers call: Kafka's per-API checks in one place.

With no authorizer configured (``authorizer.class.name`` empty) every check passes, as in Kafka.
Two kinds of checks:

- **request rules** (``REQUEST_RULES``): APIs whose whole request hangs on one resource (JoinGroup
  needs READ on its group, EndTxn WRITE on its transactional id, ...). The handler registry wraps
  those handlers (``guard``): a denied request is answered with the rule's error code in the
  response's top-level error field and never reaches the handler.
- **per-resource checks** the handlers make themselves where Kafka answers per topic or group
  (``allowed``, ``allowed_names``, ``cluster_allowed``, ``allowed_on_any``), and the KIP-430
  authorized-operations bitfields (``authorized_operations``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import protocol
from protocol import ErrorCode

from broker.security.acls import (
    CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType, operations_bitfield,
)

Op = AclOperation
RT = ResourceType

# The error Kafka answers when an operation on a resource of this type is denied.
DENIED_ERROR = {
    RT.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    RT.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    RT.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    RT.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    RT.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}

# Kafka's default messages for those errors (what its brokers put in error_message fields).
DENIED_MESSAGE = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Delegation Token authorization failed.",
}


def _authorizer(ctx):
    # getattr: handlers also run against stand-in brokers in tests that know nothing of security
    return getattr(ctx.broker, "authorizer", None)


def _api_name(ctx) -> str:
    spec = protocol.API_SPECS.get(ctx.header.api_key)
    return spec.name if spec else str(ctx.header.api_key)


def enabled(ctx) -> bool:
    return getattr(ctx.broker, "authorizer", None) is not None   # (_authorizer inline: per request)


def allowed(ctx, operation: AclOperation, resource_type: ResourceType, name: str, *,
            log_if_denied=True) -> bool:
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name,
                                api=_api_name(ctx), log_if_denied=log_if_denied)


def cluster_allowed(ctx, operation: AclOperation, *, log_if_denied=True) -> bool:
    return allowed(ctx, operation, RT.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def allowed_names(ctx, operation: AclOperation, resource_type: ResourceType,
                  names: Iterable[str], *, log_if_denied=True) -> set[str]:
    """The names (each decided once) on which `operation` is allowed."""
    distinct = set(names)
    if _authorizer(ctx) is None:
        return distinct
    return {name for name in distinct
            if allowed(ctx, operation, resource_type, name, log_if_denied=log_if_denied)}


def allowed_on_any(ctx, operation: AclOperation, resource_type: ResourceType) -> bool:
    """Kafka's authorizeByResourceType: allowed on at least one resource of the type."""
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(ctx.principal, ctx.client_host, operation,
                                                 resource_type)


def authorized_operations(ctx, resource_type: ResourceType, name: str) -> int:
    """KIP-430's bitfield; every supported operation when there is no authorizer (Kafka)."""
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])
    return authorizer.authorized_operations(ctx.principal, ctx.client_host, resource_type, name)


def may_write_idempotently(ctx) -> bool:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on
    any topic (KIP-679)."""
    return (cluster_allowed(ctx, Op.IDEMPOTENT_WRITE, log_if_denied=False)
            or allowed_on_any(ctx, Op.WRITE, RT.TOPIC))


# -- request rules ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    operation: AclOperation
    resource_type: ResourceType
    name: Callable[[object], str] = lambda body: CLUSTER_NAME
    applies: Callable[[object, int], bool] = lambda body, version: True

    def denied(self, ctx, body) -> ErrorCode | None:
        if not self.applies(body, ctx.header.api_version):
            return None
        if allowed(ctx, self.operation, self.resource_type, self.name(body) or ""):
            return None
        return DENIED_ERROR[self.resource_type]


def _field(name):
    return lambda body: getattr(body, name)


_group = Rule(Op.READ, RT.GROUP, _field("group_id"))
_txn_write = Rule(Op.WRITE, RT.TRANSACTIONAL_ID, _field("transactional_id"))

_cluster_action = Rule(Op.CLUSTER_ACTION, RT.CLUSTER)   # inter-broker APIs

# APIs whose rules are listed here but whose handlers live elsewhere (or do not exist yet) are
# guarded as soon as a handler module registers them.
REQUEST_RULES: dict[int, tuple[Rule, ...]] = {
    11: (_group,),                                       # JoinGroup
    12: (_group,),                                       # Heartbeat
    13: (_group,),                                       # LeaveGroup
    14: (_group,),                                       # SyncGroup
    25: (_txn_write, _group),                            # AddOffsetsToTxn
    26: (_txn_write,),                                   # EndTxn
    27: (_cluster_action,),                              # WriteTxnMarkers
    35: (Rule(Op.DESCRIBE, RT.CLUSTER),),                # DescribeLogDirs
    45: (Rule(Op.ALTER, RT.CLUSTER),),                   # AlterPartitionReassignments
    46: (Rule(Op.DESCRIBE, RT.CLUSTER),),                # ListPartitionReassignments
    48: (Rule(Op.DESCRIBE_CONFIGS, RT.CLUSTER),),        # DescribeClientQuotas
    49: (Rule(Op.ALTER_CONFIGS, RT.CLUSTER),),           # AlterClientQuotas
    50: (Rule(Op.DESCRIBE, RT.CLUSTER),),                # DescribeUserScramCredentials
    55: (Rule(Op.DESCRIBE, RT.CLUSTER),),                # DescribeQuorum
    56: (_cluster_action,),                              # AlterPartition
    57: (Rule(Op.ALTER, RT.CLUSTER),),                   # UpdateFeatures
    62: (_cluster_action,),                              # BrokerRegistration
    68: (_group,),                                       # ConsumerGroupHeartbeat
    76: (_group,),                                       # ShareGroupHeartbeat
    78: (_group,),                                       # ShareFetch
    79: (_group,),                                       # ShareAcknowledge
    83: (_cluster_action,),                              # InitializeShareGroupState
    84: (_cluster_action,),                              # ReadShareGroupState
    85: (_cluster_action,),                              # WriteShareGroupState
    86: (_cluster_action,),                              # DeleteShareGroupState
    87: (_cluster_action,),                              # ReadShareGroupStateSummary
    63: (_cluster_action,),                              # BrokerHeartbeat
    64: (Rule(Op.ALTER, RT.CLUSTER),),                   # UnregisterBroker
    67: (_cluster_action,),                              # AllocateProducerIds
    74: (Rule(Op.DESCRIBE_CONFIGS, RT.CLUSTER),),        # ListClientMetricsResources
}


def _every_quota_entry(body, code):
    Response = protocol.messages.AlterClientQuotasResponse
    return Response(throttle_time_ms=0, entries=[
        Response.EntryData(error_code=code, error_message=DENIED_MESSAGE[code], entity=[
            Response.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity]) for entry in body.entries])


def _every_marker(body, code):
    Response = protocol.messages.WriteTxnMarkersResponse
    return Response(markers=[Response.WritableTxnMarkerResult(
        producer_id=marker.producer_id, topics=[Response.WritableTxnMarkerTopicResult(
            name=topic.name, partitions=[Response.WritableTxnMarkerPartitionResult(
                partition_index=index, error_code=code) for index in topic.partition_indexes])
            for topic in marker.topics]) for marker in body.markers])


# Responses without a top-level error field: the error goes on every item, as Kafka does.
_PER_ITEM_ERRORS = {49: _every_quota_entry, 27: _every_marker}


def error_response(api_key: int, code: ErrorCode, body=None):
    """The response Kafka sends for a request refused as a whole: its top-level error set (or
    every item's), every other field at its empty default."""
    if api_key in _PER_ITEM_ERRORS:
        return _PER_ITEM_ERRORS[api_key](body, code)
    response = protocol.messages.RESPONSES[api_key]()
    response.error_code = code
    if hasattr(response, "error_message"):
        response.error_message = DENIED_MESSAGE[code]
    return response


def guard(api_key: int, handler):
    """`handler` behind its REQUEST_RULES (the handler registry applies it)."""
    rules = REQUEST_RULES.get(api_key)
    if not rules:
        return handler

    async def guarded(ctx, header, body):
        if _authorizer(ctx) is not None:
            for rule in rules:
                code = rule.denied(ctx, body)
                if code is not None:
                    return error_response(api_key, code, body)
        return await handler(ctx, header, body)

    guarded.__name__ = getattr(handler, "__name__", "guarded")
    guarded.__module__ = handler.__module__
    return guarded
