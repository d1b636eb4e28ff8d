"""Odradek's Kafka wire codec: pure functions over bytes, no sockets, no trio.

Generated from Kafka's JSON message specs (`python -m protocol.codegen` writes `protocol/generated/`,
committed; a test fails if it is stale) and built on `construct`: each (message, version) layout is
a construct `Message` whose compiled form is straight-line Python over a memoryview.

Requests (frames are given without their 4-byte size prefix)::

    header, body_offset = protocol.decode_request_header(frame)
    body = protocol.decode_request_body(header, frame, body_offset)
    header, body = protocol.decode_request(frame)          # both steps
    header.api_key, header.api_version, header.correlation_id, header.client_id

Responses::

    data = protocol.encode_response(api_key, api_version, correlation_id, body)      # bytes
    parts = protocol.encode_response_parts(api_key, api_version, correlation_id, body)

`encode_response_parts` returns chunks to write in order: a `records` value that is not
bytes/bytearray/memoryview (any object with `__len__`, e.g. a storage file slice) is its own
element, untouched, for `os.sendfile`; record buffers of 4 KiB or more are passed through as their
own elements too instead of being copied. The mirror pair serves the broker as a client::

    data = protocol.encode_request(api_key, api_version, correlation_id, client_id, body)
    correlation_id, body = protocol.decode_response(api_key, api_version, frame)

Headers follow Kafka: request header v2 for flexible request versions (its ClientId keeps the
int16 length), v0 only for ControlledShutdown v0, v1 otherwise; response header v1 for flexible
versions except ApiVersions, which always answers on v0.

Bodies (`protocol.messages`) are generated classes, one per spec (`messages.ProduceRequest`), with
snake_case attributes, keyword construction and value equality; omitted fields take the spec
default (arrays: a fresh empty list, structs: a fresh default struct). Nested structs hang off
their message class by spec type name (`messages.MetadataResponse.MetadataResponseTopic`).
`messages.REQUESTS` / `messages.RESPONSES` map api keys to classes; each class has `SCHEMAS`
({version: construct Message}), `VALID_VERSIONS`, `FLEXIBLE_FROM`, `API_KEY`.

Schemas outside the request/response protocol (generated the same way, `protocol.generated.internal`
and `protocol.generated.metadata`), each with versioned helpers:
- `protocol.versioned`: `encode_data(body, version)` / `decode_data(cls, version, data)` and the
  int16-version-prefixed pair `encode_versioned` / `decode_versioned`.
- `protocol.internal_topics`: `__consumer_offsets` keys/values (`encode_offset_commit_key`,
  `encode_group_metadata_key`, `decode_group_key` picks the type by key version,
  `encode_group_value`, `decode_group_value`) and `__transaction_state` (`encode_transaction_key`,
  `decode_transaction_key`, `encode_transaction_value`, `decode_transaction_value`).
- `protocol.metadata_records`: KRaft records framed as uvarints (frame version 1, record type,
  version) + body: `encode_metadata_record(body, version)`, `decode_metadata_record(data)`,
  `RECORD_TYPES`.
- `protocol.consumer_protocol`: `encode_subscription` / `decode_subscription`,
  `encode_assignment` / `decode_assignment` (newer versions read as our highest, like Kafka).
- `protocol.api_versions.unsupported_version_response(correlation_id, {api_key: (min, max)})`:
  KIP-511's v0-format ApiVersions answer with UNSUPPORTED_VERSION (and `decode_response` reads
  such an answer to any ApiVersions version, as Kafka's clients do).

Wire semantics: compact lengths in flexible versions (N+1, 0 = null); tagged fields written in tag
order and only when not at their default; unknown tagged fields kept in `_unknown_tagged_fields`
and written back; a nullable struct carries an int8 marker (-1 null); decoded `records` are
memoryview slices of the frame (zero copy) or None.

Errors:
- `DecodeError` is the only exception decoding raises (`UnsupportedVersionError` is a subclass for
  api keys/versions without a schema). Varints are bounded at 5/10 bytes and a declared length
  larger than the bytes left is rejected before anything is allocated.
- `EncodeError` when a body cannot be written in the requested version: a non-default value in a
  non-ignorable field the version lacks (ignorable ones are dropped), a null in a non-nullable
  field, a value out of range.
- `ErrorCode`: Kafka's error codes as an IntEnum (`ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3`),
  with `.retriable`.

`API_SPECS` maps each api key to `ApiSpec(api_key, name, min_version, max_version, flexible_from)`
as the specs define it (the broker advertises the subset it implements).
"""

import importlib

from protocol.errors import DecodeError, EncodeError, ErrorCode, UnsupportedVersionError

# The codec and the generated classes load on first use, so that `python -m protocol.codegen`
# works even when protocol/generated/ is missing or broken.
_LAZY = {
    "API_SPECS": "protocol.codec",
    "ApiSpec": "protocol.codec",
    "decode_request": "protocol.codec",
    "decode_request_body": "protocol.codec",
    "decode_request_header": "protocol.codec",
    "decode_response": "protocol.codec",
    "encode_request": "protocol.codec",
    "encode_response": "protocol.codec",
    "encode_response_parts": "protocol.codec",
    "request_header_version": "protocol.codec",
    "response_header_version": "protocol.codec",
}


def __getattr__(name):
    if name == "messages":
        return importlib.import_module("protocol.messages")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'protocol' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | {"messages"})


__all__ = [
    "API_SPECS",
    "ApiSpec",
    "DecodeError",
    "EncodeError",
    "ErrorCode",
    "UnsupportedVersionError",
    "decode_request",
    "decode_request_body",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "messages",
    "request_header_version",
    "response_header_version",
]
