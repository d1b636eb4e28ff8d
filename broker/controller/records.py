"""Metadata log records and their byte framing.

Each record is framed as Kafka frames metadata records: unsigned varints for frame version (0), api key
and record version, then the record body. The classes mirror Kafka's `metadata/*.json` schemas with
snake_case attributes, so the image code reads them exactly as it will read protocol's generated
classes.

TEMPORARY body encoding: until protocol's generated metadata codec lands, the body is compact JSON.
Switching replaces `_encode_body` / `_decode_body` and the class definitions below; nothing else in the
controller depends on them.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass, field

ZERO_UUID = uuid.UUID(int=0)


class RecordDecodeError(ValueError):
    """A metadata record could not be decoded."""


@dataclass
class RegisterBrokerRecord:
    API_KEY = 0
    VERSION = 3
    broker_id: int = 0
    is_migrating_zk_broker: bool = False
    incarnation_id: uuid.UUID = ZERO_UUID
    broker_epoch: int = 0
    end_points: list = field(default_factory=list)   # [BrokerEndpoint]
    features: list = field(default_factory=list)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: list = field(default_factory=list)


@dataclass
class BrokerEndpoint:
    name: str = ""
    host: str = ""
    port: int = 0
    security_protocol: int = 0


@dataclass
class UnregisterBrokerRecord:
    API_KEY = 1
    VERSION = 0
    broker_id: int = 0
    broker_epoch: int = 0


@dataclass
class TopicRecord:
    API_KEY = 2
    VERSION = 0
    name: str = ""
    topic_id: uuid.UUID = ZERO_UUID


@dataclass
class PartitionRecord:
    API_KEY = 3
    VERSION = 0
    partition_id: int = -1
    topic_id: uuid.UUID = ZERO_UUID
    replicas: list = field(default_factory=list)
    isr: list = field(default_factory=list)
    removing_replicas: list = field(default_factory=list)
    adding_replicas: list = field(default_factory=list)
    leader: int = -1
    leader_recovery_state: int = 0
    leader_epoch: int = -1
    partition_epoch: int = -1


@dataclass
class ConfigRecord:
    API_KEY = 4
    VERSION = 0
    resource_type: int = 0
    resource_name: str = ""
    name: str = ""
    value: str | None = None


@dataclass
class PartitionChangeRecord:
    API_KEY = 5
    VERSION = 0
    partition_id: int = -1
    topic_id: uuid.UUID = ZERO_UUID
    isr: list | None = None
    leader: int = -2
    replicas: list | None = None
    removing_replicas: list | None = None
    adding_replicas: list | None = None
    leader_recovery_state: int = -1


@dataclass
class FenceBrokerRecord:
    API_KEY = 7
    VERSION = 0
    id: int = 0
    epoch: int = 0


@dataclass
class UnfenceBrokerRecord:
    API_KEY = 8
    VERSION = 0
    id: int = 0
    epoch: int = 0


@dataclass
class RemoveTopicRecord:
    API_KEY = 9
    VERSION = 0
    topic_id: uuid.UUID = ZERO_UUID


@dataclass
class FeatureLevelRecord:
    API_KEY = 12
    VERSION = 0
    name: str = ""
    feature_level: int = 0


@dataclass
class ProducerIdsRecord:
    API_KEY = 15
    VERSION = 0
    broker_id: int = 0
    broker_epoch: int = -1
    next_producer_id: int = 0


@dataclass
class NoOpRecord:
    API_KEY = 20
    VERSION = 0


RECORD_TYPES = {cls.API_KEY: cls for cls in (
    RegisterBrokerRecord, UnregisterBrokerRecord, TopicRecord, PartitionRecord, ConfigRecord,
    PartitionChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord, RemoveTopicRecord,
    FeatureLevelRecord, ProducerIdsRecord, NoOpRecord,
)}


def encode_record(record) -> bytes:
    """Frame one metadata record: frame version, api key, version (unsigned varints), then the body."""
    header = _uvarint(0) + _uvarint(record.API_KEY) + _uvarint(record.VERSION)
    return header + _encode_body(record)


def decode_record(data: bytes):
    """Decode one framed metadata record; raises RecordDecodeError on anything malformed."""
    try:
        pos = 0
        frame_version, pos = _read_uvarint(data, pos)
        api_key, pos = _read_uvarint(data, pos)
        version, pos = _read_uvarint(data, pos)
    except IndexError:
        raise RecordDecodeError("truncated metadata record header") from None
    if frame_version != 0:
        raise RecordDecodeError(f"unsupported metadata frame version {frame_version}")
    cls = RECORD_TYPES.get(api_key)
    if cls is None:
        raise RecordDecodeError(f"unknown metadata record type {api_key}")
    return _decode_body(cls, bytes(data[pos:]))


def encode_records(records) -> bytes:
    """Encode an atomic batch of records as one length-prefixed sequence."""
    out = bytearray()
    for record in records:
        body = encode_record(record)
        out += len(body).to_bytes(4, "big") + body
    return bytes(out)


def decode_records(data: bytes) -> list:
    records, pos = [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise RecordDecodeError("truncated record length")
        size = int.from_bytes(data[pos:pos + 4], "big")
        pos += 4
        if pos + size > len(data):
            raise RecordDecodeError("truncated record")
        records.append(decode_record(data[pos:pos + size]))
        pos += size
    return records


# -- temporary JSON body (replaced by protocol's generated metadata codec) -------------------------

def _encode_body(record) -> bytes:
    return json.dumps(_to_json(record), separators=(",", ":"), sort_keys=True).encode()


def _to_json(value):
    if dataclasses.is_dataclass(value):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, uuid.UUID):
        return {"uuid": str(value)}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


def _decode_body(cls, body: bytes):
    try:
        raw = json.loads(body)
        kwargs = {k: _from_json(v) for k, v in raw.items()}
        if cls is RegisterBrokerRecord:
            kwargs["end_points"] = [BrokerEndpoint(**e) for e in kwargs.get("end_points", [])]
        return cls(**kwargs)
    except (ValueError, TypeError, AttributeError) as exc:
        raise RecordDecodeError(f"bad {cls.__name__} body: {exc}") from None


def _from_json(value):
    if isinstance(value, dict) and set(value) == {"uuid"}:
        return uuid.UUID(value["uuid"])
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    return value


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_uvarint(data, pos: int) -> tuple[int, int]:
    result = shift = 0
    for _ in range(5):
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise RecordDecodeError("varint too long")
