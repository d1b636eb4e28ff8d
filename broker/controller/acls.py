"""ACL changes (CreateAcls / DeleteAcls) turned into metadata records, as Kafka's AclControlManager.

Each function plans against one image and returns (records to commit, per-item results); the
controller commits the records as one atomic batch. An ACL identical to a stored one is not stored
twice; an ACL matched by several delete filters is removed once and reported under each.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Sequence

from broker.security.acls import AclBinding, AclBindingFilter, InvalidAcl, record_fields

from . import records as r
from .errors import ErrorCode
from .image import MetadataImage


@dataclass
class AclCreateResult:
    error_code: int = 0
    error_message: str | None = None


@dataclass
class AclDeleteResult:
    error_code: int = 0
    error_message: str | None = None
    deleted: list[AclBinding] = field(default_factory=list)


def _new_id(taken) -> uuid.UUID:
    while True:
        candidate = uuid.uuid4()
        if candidate.int not in (0, 1) and candidate not in taken:
            return candidate


def plan_create(image: MetadataImage, bindings: Sequence[AclBinding]):
    stored = set(image.acls.values())
    records, results = [], []
    for binding in bindings:
        result = AclCreateResult()
        results.append(result)
        try:
            binding.validate_new()
        except InvalidAcl as exc:
            result.error_code, result.error_message = int(ErrorCode.INVALID_REQUEST), str(exc)
            continue
        if binding in stored:
            continue
        stored.add(binding)
        records.append(r.AccessControlEntryRecord(id=_new_id(image.acls), **record_fields(binding)))
    return records, results


def plan_delete(image: MetadataImage, filters: Sequence[AclBindingFilter]):
    records, results, removed = [], [], set()
    for acl_filter in filters:
        result = AclDeleteResult()
        results.append(result)
        try:
            acl_filter.validate()
        except InvalidAcl as exc:
            result.error_code, result.error_message = int(ErrorCode.INVALID_REQUEST), str(exc)
            continue
        for acl_id, acl in image.acls.items():
            if not acl_filter.matches(acl):
                continue
            result.deleted.append(acl)
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(r.RemoveAccessControlEntryRecord(id=acl_id))
    return records, results
