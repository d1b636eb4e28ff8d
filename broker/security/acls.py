"""Kafka's ACL model: resource patterns, access control entries, bindings and filters.

Codes are Kafka's wire values (ResourceType, PatternType, AclOperation, AclPermissionType), so
bindings go to and from CreateAcls / DescribeAcls / DeleteAcls and the metadata log's
AccessControlEntryRecord without translation. Matching a filter against a binding follows
``AclBindingFilter.matches``; matching a binding against a request is the authorizer's job.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


Op = AclOperation

# An ALLOW for any of these also allows DESCRIBE / DESCRIBE_CONFIGS (a DENY implies nothing).
IMPLIES_DESCRIBE = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL})

# The operations each resource type has (Kafka's AclEntry.supportedOperations): what KIP-430's
# authorized-operations fields report on.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def operations_bitfield(operations) -> int:
    value = 0
    for operation in operations:
        value |= 1 << int(operation)
    return value


class InvalidAcl(ValueError):
    """A binding or filter Kafka refuses with INVALID_REQUEST (the message says why)."""


def _enum(kind, code):
    """Kafka's fromCode: a code it does not know reads as UNKNOWN."""
    try:
        return kind(code)
    except ValueError:
        return kind.UNKNOWN


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str          # "User:alice", "User:*"
    host: str               # "*" or an IP address
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def of(cls, resource_type, resource_name, pattern_type, principal, host, operation,
           permission) -> "AclBinding":
        return cls(_enum(ResourceType, resource_type), resource_name,
                   _enum(PatternType, pattern_type), principal, host,
                   _enum(AclOperation, operation), _enum(AclPermissionType, permission))

    @property
    def is_constructible(self) -> bool:
        """Whether Kafka can build this binding at all: its ResourcePattern and AccessControlEntry
        refuse the filter-only values ANY and MATCH (a broker then fails the whole CreateAcls
        request with UNKNOWN_SERVER_ERROR, checked against Kafka 3.9)."""
        return (self.resource_type != ResourceType.ANY
                and self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
                and self.operation != Op.ANY and self.permission != AclPermissionType.ANY)

    def validate_name(self) -> None:
        """The broker's checks (INVALID_REQUEST for this binding alone)."""
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl("The only valid name for the CLUSTER resource is " + CLUSTER_NAME)
        if not self.resource_name:
            raise InvalidAcl("Invalid empty resource name")

    def validate_new(self) -> None:
        """Raise InvalidAcl unless Kafka's controller would store this binding (AclControlManager:
        codes it does not know, filter-only values, an empty name). Principal and host are stored
        as given, as Kafka does (an ACL whose principal matches no one is harmless)."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAcl(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (Op.UNKNOWN, Op.ANY):
            raise InvalidAcl(f"Invalid operation {self.operation.name}")
        if self.permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
            raise InvalidAcl(f"Invalid permissionType {self.permission.name}")
        self.validate_name()
        if self.principal is None or self.host is None:
            raise InvalidAcl("Principal and host must not be null")

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation="
                f"{self.operation.name}, permissionType={self.permission.name}) on "
                f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls filter; None fields (name, principal, host) match anything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = Op.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def of(cls, resource_type, resource_name, pattern_type, principal, host, operation,
           permission) -> "AclBindingFilter":
        return cls(_enum(ResourceType, resource_type), resource_name,
                   _enum(PatternType, pattern_type), principal, host,
                   _enum(AclOperation, operation), _enum(AclPermissionType, permission))

    def validate(self) -> None:
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            raise InvalidAcl("Unknown patternFilter.")
        if self.operation == Op.UNKNOWN or self.permission == AclPermissionType.UNKNOWN:
            raise InvalidAcl("Unknown entryFilter.")

    def matches(self, acl: AclBinding) -> bool:
        return self.matches_pattern(acl) and self.matches_entry(acl)

    def matches_pattern(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != acl.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if wanted in (PatternType.ANY, acl.pattern_type):
            return name == acl.resource_name
        # MATCH: every pattern that would apply to a resource called `name`.
        if acl.pattern_type == PatternType.LITERAL:
            return name == acl.resource_name or acl.resource_name == WILDCARD_RESOURCE
        return name.startswith(acl.resource_name)

    def matches_entry(self, acl: AclBinding) -> bool:
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation == Op.ANY or self.operation == acl.operation)
                and (self.permission == AclPermissionType.ANY
                     or self.permission == acl.permission))


def binding_from_record(record) -> AclBinding:
    return AclBinding.of(record.resource_type, record.resource_name, record.pattern_type,
                         record.principal, record.host, record.operation,
                         record.permission_type)


def record_fields(acl: AclBinding) -> dict:
    """AccessControlEntryRecord's fields for `acl` (without the id)."""
    return dict(resource_type=int(acl.resource_type), resource_name=acl.resource_name,
                pattern_type=int(acl.pattern_type), principal=acl.principal, host=acl.host,
                operation=int(acl.operation), permission_type=int(acl.permission))
