"""Client quotas in the metadata log: Kafka's entities, AlterClientQuotas validation, Describe filters.

An entity is a sorted tuple of (entity type, name) pairs; a name of None is the ``<default>`` entity
of that type. Types are ``user``, ``client-id`` (alone or together) and ``ip`` (alone). Changes become
``ClientQuotaRecord``s committed by the controller, so every broker's image holds the same quotas and
they survive a restart (the image's snapshot writes them back as records).

The rules and messages are Kafka's (its ClientQuotaControlManager and ClientQuotasImage), checked
against Kafka 3.9: an unknown key, a value not above zero, a fraction for an integer key, an empty
name or entity, an unknown type, ip combined with user/client-id: INVALID_REQUEST per entry.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from . import records as r
from .errors import ApiError, ErrorCode

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, "str | None"], ...]

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1
# Key -> Kafka's config type (LONG / INT must be whole numbers; DOUBLE may be fractional).
CLIENT_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
               REQUEST_PERCENTAGE: "DOUBLE", CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}


@dataclass
class QuotaAlteration:
    """One AlterClientQuotas entry: the entity as sent (pairs, maybe duplicated) and its ops."""

    entity: Sequence[tuple[str, str | None]]
    ops: Sequence[tuple[str, float, bool]]     # (key, value, remove)
    error_code: int = 0
    error_message: str | None = None


def make_entity(pairs) -> Entity:
    """The canonical entity; a type given twice keeps its last name (Kafka builds a map)."""
    return tuple(sorted(dict(pairs).items()))


def entity_text(entity: Entity) -> str:
    """Kafka's ClientQuotaEntity.toString, e.g. ``ClientQuotaEntity(entries={client-id=c1})``."""
    inner = ", ".join(f"{t}={n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _check_entity(pairs) -> dict[str, str | None]:
    if not pairs:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    validated: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
        validated[entity_type] = name
    return validated


def _keys_for(validated: Mapping[str, str | None]) -> dict[str, str]:
    if IP in validated:
        if len(validated) > 1:
            # (sic: Kafka's message lacks the space)
            raise ApiError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP "
                           "entity shouldnot be combined with User or ClientId")
        address = validated[IP]
        if address is not None and not _is_ip(address):
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"{address} is not a valid IP or resolvable host.")
        return IP_KEYS
    return CLIENT_KEYS


def _is_ip(text: str) -> bool:
    # Kafka also accepts a resolvable host name; the controller does not do DNS, literals only.
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _check_value(key: str, kind: str, value: float) -> None:
    if not value > 0.0:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        return
    limit, name = (_LONG_MAX, "LONG") if kind == "LONG" else (_INT_MAX, "INT")
    if value > limit:
        raise ApiError(ErrorCode.INVALID_REQUEST,
                       f"Proposed value for {key} is too large for a {name}.")
    if value != math.floor(value):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")


def alteration_records(current: Mapping[Entity, Mapping[str, float]],
                       alteration: QuotaAlteration) -> list:
    """The ClientQuotaRecords one entry writes, or raises ApiError (the entry's answer)."""
    validated = _check_entity(alteration.entity)
    entity = make_entity(validated.items())
    keys = [key for key, _, _ in alteration.ops]
    if len(set(keys)) != len(keys):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(entity)}")
    allowed = _keys_for(validated)
    existing = current.get(entity, {})
    out = []
    entity_data = [r.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity]
    for key, value, remove in alteration.ops:
        if remove:
            if key in existing:   # removing what is not there writes nothing (and is no error)
                out.append(r.ClientQuotaRecord(entity=entity_data, key=key, remove=True))
            continue
        kind = allowed.get(key)
        if kind is None:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
        _check_value(key, kind, value)
        if existing.get(key) != value:
            out.append(r.ClientQuotaRecord(entity=entity_data, key=key, value=float(value)))
    return out


def check_duplicates(alterations: Sequence[QuotaAlteration]) -> None:
    """Mark the second and later entries for one entity as Kafka does."""
    seen = set()
    for alteration in alterations:
        try:
            entity = make_entity(_check_entity(alteration.entity).items())
        except ApiError:
            continue
        if entity in seen:
            alteration.error_code = ErrorCode.INVALID_REQUEST
            alteration.error_message = f"Ignoring duplicate entity {entity_text(entity)}"
        seen.add(entity)


# -- DescribeClientQuotas ------------------------------------------------------------------------

def describe(quotas: Mapping[Entity, Mapping[str, float]], components, strict: bool):
    """[(entity, {key: value})] matching the filter; raises ApiError for a bad filter."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for entity_type, match_type, match in components:
        if entity_type == "":
            raise ApiError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in exact or entity_type in specified:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in (IP, USER, CLIENT_ID):
            raise ApiError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, "
                               "but set match string to null.")
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, "
                               "but also specified a match string.")
            exact[entity_type] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, "
                               "but also specified a match string.")
            specified.add(entity_type)
        else:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
    filtered = set(exact) | specified
    if IP in filtered and filtered & {USER, CLIENT_ID}:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP "
                       "filter component should not be used with user or clientId filter "
                       "component.")
    out = []
    for entity, values in sorted(quotas.items(), key=lambda item: repr(item[0])):
        entries = dict(entity)
        if strict and len(entries) != len(filtered):
            continue
        if any(t not in entries or entries[t] != name for t, name in exact.items()):
            continue
        if any(t not in entries for t in specified):
            continue
        out.append((entity, dict(values)))
    return out


# -- the controller operation ----------------------------------------------------------------------

async def alter_client_quotas(controller, alterations: Sequence[QuotaAlteration],
                              validate_only: bool = False) -> Sequence[QuotaAlteration]:
    """Validate every entry (its error fields say how it went) and commit the valid ones' records
    as one atomic batch; nothing is written when `validate_only`. Runs under the controller's
    mutation lock like its own operations (kept here: controller.py is split by job)."""
    await controller._require_leader()
    async with controller._lock:
        check_duplicates(alterations)
        batch = []
        current = controller.image.client_quotas
        for alteration in alterations:
            if alteration.error_code:
                continue
            try:
                batch += alteration_records(current, alteration)
            except ApiError as exc:
                alteration.error_code, alteration.error_message = int(exc.code), exc.message
        if not validate_only:
            await controller._commit(batch)
        return alterations
