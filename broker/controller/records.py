"""Metadata log records: protocol's generated KRaft record classes and the controller's batch framing.

Each record is serialized exactly as Kafka frames metadata records (`protocol.metadata_records`: unsigned
varints frame version, record type, record version, then the body in the highest version we know). An
entry of the metadata log holds one atomic batch of records, each prefixed with its u32 length.
"""

from __future__ import annotations

import uuid

from protocol import DecodeError
from protocol.generated.metadata import (
    AccessControlEntryRecord, BrokerRegistrationChangeRecord, ClientQuotaRecord, ConfigRecord,
    DelegationTokenRecord, FeatureLevelRecord, FenceBrokerRecord, NoOpRecord, PartitionChangeRecord,
    PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord, RegisterControllerRecord,
    RemoveAccessControlEntryRecord, RemoveDelegationTokenRecord, RemoveTopicRecord,
    RemoveUserScramCredentialRecord, TopicRecord, UnfenceBrokerRecord, UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from protocol.metadata_records import decode_metadata_record, encode_metadata_record

ZERO_UUID = uuid.UUID(int=0)
BrokerEndpoint = RegisterBrokerRecord.BrokerEndpoint
RecordDecodeError = DecodeError

__all__ = [
    "AccessControlEntryRecord", "RemoveAccessControlEntryRecord", "BrokerEndpoint",
    "ClientQuotaRecord", "BrokerRegistrationChangeRecord", "ConfigRecord", "DelegationTokenRecord",
    "FeatureLevelRecord", "FenceBrokerRecord", "NoOpRecord", "PartitionChangeRecord",
    "PartitionRecord", "ProducerIdsRecord", "RecordDecodeError", "RegisterBrokerRecord",
    "RegisterControllerRecord", "RemoveDelegationTokenRecord", "RemoveTopicRecord",
    "RemoveUserScramCredentialRecord", "TopicRecord", "UnfenceBrokerRecord",
    "UnregisterBrokerRecord", "UserScramCredentialRecord", "ZERO_UUID", "decode_record",
    "decode_records", "encode_record", "encode_records",
]


def encode_record(record) -> bytes:
    return encode_metadata_record(record)


def decode_record(data) -> object:
    """One framed record; raises protocol.DecodeError on anything malformed."""
    record, _version = decode_metadata_record(data)
    return record


def encode_records(records) -> bytes:
    """An atomic batch: each record as u32 length + framed record."""
    out = bytearray()
    for record in records:
        body = encode_record(record)
        out += len(body).to_bytes(4, "big") + body
    return bytes(out)


def decode_records(data) -> list:
    records, pos, view = [], 0, memoryview(data)
    while pos < len(view):
        if pos + 4 > len(view):
            raise RecordDecodeError("truncated record length")
        size = int.from_bytes(view[pos:pos + 4], "big")
        pos += 4
        if pos + size > len(view):
            raise RecordDecodeError("truncated record")
        records.append(decode_record(view[pos:pos + size]))
        pos += size
    return records
