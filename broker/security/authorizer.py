"""Kafka's StandardAuthorizer: decides whether a principal may perform an operation on a resource.

The ACLs come from the metadata image (every broker replays the same AccessControlEntryRecords)
and are indexed by resource type, pattern type and name, so a decision looks at only the ACLs that
can apply: the literal name, the literal wildcard "*" and the prefixes of the name that some
PREFIXED ACL uses. The rules are Kafka's:

- a super user (``super.users``, "User:a;User:b") is allowed everything;
- when no ACL at all applies to the resource, ``allow.everyone.if.no.acl.found`` decides;
- otherwise a matching DENY wins over a matching ALLOW, and no matching ALLOW denies;
- an ACL matches the principal exactly or through "User:*", the host exactly or through "*";
- an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, one of ALTER_CONFIGS also
  DESCRIBE_CONFIGS, ALL allows everything; a DENY only denies its own operation (or all, for ALL).

Denials are logged on ``odradek.authorizer`` at INFO (at most ``LOG_BURST`` lines per second, the
rest counted and summarised), allowed requests at DEBUG; both are counted for the metrics.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Iterable

from prometheus_client.metrics_core import Metric

from broker.security.acls import (
    IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS, SUPPORTED_OPERATIONS, WILDCARD_HOST,
    WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, AclBinding, AclOperation, AclPermissionType,
    PatternType, ResourceType, operations_bitfield,
)
from broker.security.principal import KafkaPrincipal

log = logging.getLogger("odradek.authorizer")

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# The ZooKeeper-era class name; Kafka configs written for it mean the same ACL semantics.
LEGACY_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
LOG_BURST = 20   # denial log lines per second before the rest are only counted

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


class AclIndex:
    """The ACLs by (resource type, pattern type) and name, with the prefix lengths in use."""

    def __init__(self):
        self._by_pattern: dict[tuple[ResourceType, PatternType], dict[str, list[AclBinding]]] = {}
        self._prefix_lengths: dict[ResourceType, Counter] = {}
        self.count = 0

    def add(self, acl: AclBinding) -> None:
        names = self._by_pattern.setdefault((acl.resource_type, acl.pattern_type), {})
        names.setdefault(acl.resource_name, []).append(acl)
        if acl.pattern_type == PatternType.PREFIXED:
            self._prefix_lengths.setdefault(acl.resource_type, Counter())[len(acl.resource_name)] += 1
        self.count += 1

    def remove(self, acl: AclBinding) -> None:
        names = self._by_pattern.get((acl.resource_type, acl.pattern_type), {})
        bucket = names.get(acl.resource_name)
        if not bucket or acl not in bucket:
            return
        bucket.remove(acl)
        if not bucket:
            del names[acl.resource_name]
        if acl.pattern_type == PatternType.PREFIXED:
            lengths = self._prefix_lengths[acl.resource_type]
            lengths[len(acl.resource_name)] -= 1
            if not lengths[len(acl.resource_name)]:
                del lengths[len(acl.resource_name)]
        self.count -= 1

    def applying_to(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose pattern covers the resource `name` of `resource_type`."""
        out: list[AclBinding] = []
        literal = self._by_pattern.get((resource_type, PatternType.LITERAL))
        if literal:
            out += literal.get(name, ())
            if name != WILDCARD_RESOURCE:
                out += literal.get(WILDCARD_RESOURCE, ())
        prefixed = self._by_pattern.get((resource_type, PatternType.PREFIXED))
        if prefixed:
            for length in self._prefix_lengths[resource_type]:
                if length <= len(name):
                    out += prefixed.get(name[:length], ())
        return out

    def of_type(self, resource_type: ResourceType) -> Iterable[AclBinding]:
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for bucket in self._by_pattern.get((resource_type, pattern_type), {}).values():
                yield from bucket


def _grants(acl: AclBinding, operation: AclOperation) -> bool:
    """Whether `acl`'s operation covers `operation` (implications apply to ALLOW only)."""
    if acl.operation == Op.ALL or acl.operation == operation:
        return True
    if acl.permission != ALLOW:
        return False
    if operation == Op.DESCRIBE:
        return acl.operation in IMPLIES_DESCRIBE
    if operation == Op.DESCRIBE_CONFIGS:
        return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


class StandardAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found=False):
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.index = AclIndex()
        self._acls = None           # the image's ACL mapping the index was built from
        self.allowed = 0
        self.denied = 0
        self._log_second = 0
        self._logged_this_second = 0
        self._suppressed = 0

    @classmethod
    def from_config(cls, config) -> "StandardAuthorizer | None":
        """The authorizer `authorizer.class.name` asks for; None (everything allowed) when empty."""
        name = (config["authorizer.class.name"] or "").strip()
        if not name:
            return None
        super_users = [p.strip() for p in (config["super.users"] or "").split(";") if p.strip()]
        return cls(super_users, config["allow.everyone.if.no.acl.found"])

    # -- keeping up with the metadata image ---------------------------------------------------------

    def load(self, acls) -> None:
        """Bring the index to the image's ACL mapping (by id), applying only the difference."""
        if acls is self._acls:
            return
        before = self._acls or {}
        for acl_id, acl in before.items():
            if acl_id not in acls:
                self.index.remove(acl)
        for acl_id, acl in acls.items():
            if acl_id not in before:
                self.index.add(acl)
        self._acls = acls

    def on_image_change(self, change) -> None:
        self.load(change.new.acls)

    # -- decisions ------------------------------------------------------------------------------

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def decide(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
               resource_type: ResourceType, name: str) -> tuple[bool, object]:
        """(allowed, the rule that decided: a name or the deciding AclBinding), without logging
        or counting."""
        if self.is_super_user(principal):
            return True, "SuperUser"
        applying = self.index.applying_to(resource_type, name)
        if not applying:
            return self.allow_everyone_if_no_acl_found, "NoAclFound"
        who = str(principal)
        allowed_by = None
        for acl in applying:
            if acl.principal != who and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != WILDCARD_HOST and acl.host != host:
                continue
            if not _grants(acl, operation):
                continue
            if acl.permission == DENY:
                return False, acl
            allowed_by = acl
        if allowed_by is not None:
            return True, allowed_by
        return False, "DefaultDeny"

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str, *, api: str = "",
                  log_if_allowed=True, log_if_denied=True) -> bool:
        allowed, rule = self.decide(principal, host, operation, resource_type, name)
        if allowed:
            self.allowed += 1
            if log_if_allowed and log.isEnabledFor(logging.DEBUG):
                log.debug(self._line(principal, "Allowed", operation, host, resource_type, name,
                                     api, rule))
        else:
            self.denied += 1
            if log_if_denied:
                self._log_denial(principal, operation, host, resource_type, name, api, rule)
        return allowed

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str,
                                   operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether `operation` is allowed on at least one resource of the type (Kafka's
        Authorizer.authorizeByResourceType: an ALLOW not dominated by a DENY)."""
        # Kafka first authorizes a made-up name, so super users (and allow.everyone) pass.
        if self.authorize(principal, host, operation, resource_type, "hardcode",
                          log_if_denied=False):
            return True
        who = str(principal)
        deny_literal, deny_prefixed, allow_literal, allow_prefixed = set(), set(), set(), set()
        for acl in self.index.of_type(resource_type):
            if acl.host != host and acl.host != WILDCARD_HOST:
                continue
            if acl.principal != who and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != operation and acl.operation != Op.ALL:
                continue
            literal = acl.pattern_type == PatternType.LITERAL
            if acl.permission == DENY:
                if literal and acl.resource_name == WILDCARD_RESOURCE:
                    return False
                (deny_literal if literal else deny_prefixed).add(acl.resource_name)
            elif acl.permission == ALLOW:
                if literal and acl.resource_name == WILDCARD_RESOURCE:
                    return True
                (allow_literal if literal else allow_prefixed).add(acl.resource_name)
        def dominated(name):   # a DENY prefix covers every resource this ALLOW could reach
            return any(name[:end] in deny_prefixed for end in range(1, len(name) + 1))

        return (any(name not in deny_literal and not dominated(name) for name in allow_literal)
                or any(not dominated(name) for name in allow_prefixed))

    def authorized_operations(self, principal: KafkaPrincipal, host: str,
                              resource_type: ResourceType, name: str) -> int:
        """KIP-430's bitfield: the resource type's operations this principal may perform."""
        return operations_bitfield(
            op for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(principal, host, op, resource_type, name,
                              log_if_allowed=False, log_if_denied=False))

    # -- audit ----------------------------------------------------------------------------------

    @staticmethod
    def _line(principal, verdict, operation, host, resource_type, name, api, rule) -> str:
        kind = resource_type.name.title().replace("_", "")
        return (f"Principal = {principal} is {verdict} operation = {operation.name} from host = "
                f"{host} on resource = {kind}:LITERAL:{name} for request = {api or '?'} "
                f"based on rule {f'MatchingAcl(acl={rule})' if isinstance(rule, AclBinding) else rule}")

    def _log_denial(self, principal, operation, host, resource_type, name, api, rule) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        second = int(time.monotonic())
        if second != self._log_second:
            if self._suppressed:
                log.info("%d more authorization denials not logged", self._suppressed)
            self._log_second, self._logged_this_second, self._suppressed = second, 0, 0
        if self._logged_this_second >= LOG_BURST:
            self._suppressed += 1
            return
        self._logged_this_second += 1
        log.info(self._line(principal, "Denied", operation, host, resource_type, name, api, rule))


class AuthorizerMetricsCollector:
    """Kafka's authorizer metrics (type=authorizer-metrics): decisions and the ACL count."""

    def __init__(self, authorizer: StandardAuthorizer):
        self.authorizer = authorizer

    def collect(self):
        a = self.authorizer
        for name, doc, value in (
                ("kafka_server_authorizermetrics_authorizationallowed_total",
                 "Authorization decisions that allowed the operation.", a.allowed),
                ("kafka_server_authorizermetrics_authorizationdenied_total",
                 "Authorization decisions that denied the operation.", a.denied)):
            family = Metric(name.removesuffix("_total"), doc, "counter")
            family.add_sample(name, {}, value)
            yield family
        count = Metric("kafka_server_authorizermetrics_aclstotalcount",
                       "ACLs the authorizer holds.", "gauge")
        count.add_sample("kafka_server_authorizermetrics_aclstotalcount", {}, a.index.count)
        yield count
