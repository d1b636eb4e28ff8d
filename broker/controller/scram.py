"""AlterUserScramCredentials turned into UserScramCredentialRecords, checked as Kafka's controller
checks them: known mechanism, 4096..16384 iterations, one operation per user, no
deletion of a credential that does not exist. The password never reaches the broker: the client
sends the salted password and the controller keeps only StoredKey and ServerKey."""

from __future__ import annotations

from dataclasses import dataclass

from broker.security.sasl.scram import (MAX_ITERATIONS, MECHANISM_BY_TYPE, MIN_ITERATIONS,
                                        credential_from_salted)

from . import records as r
from .errors import ApiError, ErrorCode
from .image import MetadataImage


@dataclass
class ScramDeletion:
    name: str
    mechanism: int


@dataclass
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def alteration_records(image: MetadataImage, deletions, upsertions):
    """(records, {user: (error code, message)}), decided as Kafka's controller does: deletions first,
    then upsertions; a user's first error stands, and a second operation on a user, whatever its
    mechanism, makes it DUPLICATE_RESOURCE with none of its operations applied."""
    results: dict[str, tuple[int, str | None]] = {}
    pending: dict[str, object] = {}
    for op in [*deletions, *upsertions]:
        if results.setdefault(op.name, (0, None))[0]:
            continue
        if pending.pop(op.name, None) is not None:
            results[op.name] = (int(ErrorCode.DUPLICATE_RESOURCE),
                                "A user credential cannot be altered twice in the same request")
            continue
        try:
            pending[op.name] = _record(image, op)
        except ApiError as exc:
            results[op.name] = (int(exc.code), exc.message)
    return list(pending.values()), results


def _record(image: MetadataImage, op):
    if not op.name:
        raise ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    mechanism = MECHANISM_BY_TYPE.get(op.mechanism)
    if mechanism is None:
        raise ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    if isinstance(op, ScramDeletion):
        if (op.name, mechanism) not in image.scram_credentials:
            raise ApiError(ErrorCode.RESOURCE_NOT_FOUND,
                           "Attempt to delete a user credential that does not exist")
        return r.RemoveUserScramCredentialRecord(name=op.name, mechanism=op.mechanism)
    if op.iterations < MIN_ITERATIONS:
        raise ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if op.iterations > MAX_ITERATIONS:
        raise ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    if not op.salt:
        raise ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must not be empty")
    if not op.salted_password:
        raise ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salted password must not be empty")
    credential = credential_from_salted(mechanism, bytes(op.salted_password), bytes(op.salt),
                                        op.iterations)
    return r.UserScramCredentialRecord(
        name=op.name, mechanism=op.mechanism, salt=credential.salt,
        stored_key=credential.stored_key, server_key=credential.server_key,
        iterations=credential.iterations)
