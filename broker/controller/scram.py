"""AlterUserScramCredentials turned into UserScramCredentialRecords, checked as Kafka's controller
checks them: known mechanism, 4096..16384 iterations, one operation per user and mechanism, no
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
    """(records, {user: (error code, message)}): a user with any bad operation gets no records."""
    results: dict[str, tuple[int, str | None]] = {}
    per_user: dict[str, list] = {}
    seen: dict[str, set] = {}
    for op in [*deletions, *upsertions]:
        results.setdefault(op.name, (0, None))
        mechanisms = seen.setdefault(op.name, set())
        if op.mechanism in mechanisms:
            results[op.name] = (int(ErrorCode.DUPLICATE_RESOURCE),
                                "A user credential cannot be altered twice in the same request")
        mechanisms.add(op.mechanism)
        per_user.setdefault(op.name, []).append(op)
    records = []
    for user, ops in per_user.items():
        if results[user][0]:
            continue
        try:
            records += [_record(image, op) for op in ops]
        except ApiError as exc:
            results[user] = (int(exc.code), exc.message)
    return [rec for rec in records if results[rec.name][0] == 0], results


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
