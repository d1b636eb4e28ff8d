"""Framing-free request/response codec: headers, body dispatch by (api key, version), error wrapping."""

import struct
from typing import NamedTuple

from protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from protocol.generated.messages import REQUESTS, RESPONSES, RequestHeader, ResponseHeader
from protocol.produce_answer import encode_produce_response
from protocol.wire import Writer, as_view

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7
_API_KEY_VERSION = struct.Struct(">hh")


class ApiSpec(NamedTuple):
    """One api key as the specs define it."""

    api_key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None  # first flexible version, None if never flexible

    def is_flexible(self, version):
        return self.flexible_from is not None and version >= self.flexible_from


API_SPECS = {
    key: ApiSpec(key, cls.NAME[: -len("Request")], cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1], cls.FLEXIBLE_FROM)
    for key, cls in sorted(REQUESTS.items())
}

# The request header's api key/version under the names handlers use.
RequestHeader.api_key = property(lambda self: self.request_api_key)
RequestHeader.api_version = property(lambda self: self.request_api_version)


def request_header_version(api_key, api_version):
    """Header v2 for flexible request versions (also versions newer than we know), v0 only for
    ControlledShutdown v0, v1 otherwise (and for unknown api keys)."""
    spec = API_SPECS.get(api_key)
    if spec is None:
        return 1
    if spec.is_flexible(api_version):
        return 2
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 1


def response_header_version(api_key, api_version):
    """Header v1 for flexible response versions, except ApiVersions which always answers on v0."""
    spec = API_SPECS.get(api_key)
    if api_key == API_VERSIONS_KEY or spec is None or not spec.is_flexible(api_version):
        return 0
    return 1


_parsers = {}
_builders = {}


def _parser(message_cls, version):
    key = (message_cls, version)
    fn = _parsers.get(key)
    if fn is None:
        schema = message_cls.SCHEMAS.get(version)
        if schema is None:
            raise UnsupportedVersionError(f"{message_cls.NAME} has no version {version}")
        fn = _parsers[key] = schema.compiled().parse_fast
    return fn


def _builder(message_cls, version):
    key = (message_cls, version)
    fn = _builders.get(key)
    if fn is None:
        schema = message_cls.SCHEMAS.get(version)
        if schema is None:
            raise EncodeError(f"{message_cls.NAME} has no version {version}")
        fn = _builders[key] = schema.compiled().build_fast
    return fn


def _decode(message_cls, version, buf, pos):
    fn = _parsers.get((message_cls, version)) or _parser(message_cls, version)
    try:
        return fn(buf, pos, len(buf))
    except DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 — malformed input must surface as one error type
        raise DecodeError(f"malformed {message_cls.NAME} v{version}: {type(exc).__name__}: {exc}") from None


def _encode(message_cls, version, w, out, body):
    if type(body) is not message_cls:
        raise EncodeError(f"expected a {message_cls.NAME}, got {type(body).__name__}")
    try:
        return _builder(message_cls, version)(w, out, body)
    except EncodeError as exc:
        raise EncodeError(f"{message_cls.NAME} v{version}: {exc}") from None
    except (struct.error, TypeError, AttributeError, OverflowError, ValueError) as exc:
        raise EncodeError(f"cannot encode {message_cls.NAME} v{version}: {type(exc).__name__}: {exc}") from None


# -- requests ------------------------------------------------------------------------------------

_header_parsers = {}  # (api key, version) -> header parser, for known versions only (bounded)


def _header_parser(api_key, api_version):
    fn = _parser(RequestHeader, request_header_version(api_key, api_version))
    spec = API_SPECS.get(api_key)
    if spec is not None and spec.min_version <= api_version <= spec.max_version:
        _header_parsers[(api_key, api_version)] = fn
    return fn


def decode_request_header(frame):
    """Decode a request header from a frame (without its 4-byte size): (header, body_offset)."""
    buf = as_view(frame)
    try:
        api_key, api_version = _API_KEY_VERSION.unpack_from(buf, 0)
        fn = _header_parsers.get((api_key, api_version)) or _header_parser(api_key, api_version)
        return fn(buf, 0, len(buf))
    except DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 — malformed input must surface as one error type
        raise DecodeError(f"malformed request header: {type(exc).__name__}: {exc}") from None


def decode_request_body(header, frame, body_offset):
    """Decode the body that follows `header` in `frame`. Unknown api keys/versions raise
    UnsupportedVersionError (a DecodeError)."""
    cls = REQUESTS.get(header.request_api_key)
    if cls is None:
        raise UnsupportedVersionError(f"unknown api key {header.request_api_key}")
    return _decode(cls, header.request_api_version, as_view(frame), body_offset)[0]


def decode_request(frame):
    """Decode a whole request frame: (header, body)."""
    buf = as_view(frame)
    header, pos = decode_request_header(buf)
    return header, decode_request_body(header, buf, pos)


def encode_request(api_key, api_version, correlation_id, client_id, body):
    """Encode a request (header + body) as bytes, without the size prefix."""
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise EncodeError(f"unknown api key {api_key}")
    header = RequestHeader(request_api_key=api_key, request_api_version=api_version,
                           correlation_id=correlation_id, client_id=client_id)
    w = Writer()
    out = _encode(RequestHeader, request_header_version(api_key, api_version), w, bytearray(), header)
    out = _encode(cls, api_version, w, out, body)
    return _join(w.finish(out))


# -- responses -----------------------------------------------------------------------------------


class PreEncodedBody:
    """A response body that encodes itself, from parts its maker encoded beforehand (e.g. cached
    per topic: `protocol.metadata_answer`). `encode_parts` returns the chunks of the whole response
    (header included, no size prefix)."""

    __slots__ = ()

    def encode_parts(self, api_version: int, correlation_id: int) -> list:
        raise NotImplementedError

_CORRELATION = struct.Struct(">i")


def _response_head(api_key, api_version, correlation_id):
    out = bytearray(_CORRELATION.pack(correlation_id))
    if response_header_version(api_key, api_version) == 1:
        out.append(0)  # no tagged fields in the response header
    return out


def encode_response(api_key, api_version, correlation_id, body):
    """Encode a response (header + body) as bytes, without the size prefix."""
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise EncodeError(f"unknown api key {api_key}")
    if type(body) is not cls and isinstance(body, PreEncodedBody):
        return b"".join(body.encode_parts(api_version, correlation_id))
    w = Writer()
    out = _encode(cls, api_version, w, _response_head(api_key, api_version, correlation_id), body)
    return _join(w.finish(out))


def encode_response_parts(api_key, api_version, correlation_id, body):
    """Encode a response as a list of chunks to write in order (no size prefix).

    A `records` value that is not bytes/bytearray/memoryview (e.g. a storage file slice with
    `__len__`) is its own element, untouched, for `os.sendfile`; large record buffers are also
    passed through as their own elements instead of being copied.
    """
    if api_key == 0:   # single-partition Produce answers: a template (protocol/produce_answer.py)
        data = encode_produce_response(api_version, correlation_id, body)
        if data is not None:
            return [data]
    return generic_response_parts(api_key, api_version, correlation_id, body)


def generic_response_parts(api_key, api_version, correlation_id, body):
    """encode_response_parts() through the generated encoders only (no template)."""
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise EncodeError(f"unknown api key {api_key}")
    if type(body) is not cls and isinstance(body, PreEncodedBody):
        return body.encode_parts(api_version, correlation_id)
    w = Writer(split=True)
    out = _encode(cls, api_version, w, _response_head(api_key, api_version, correlation_id), body)
    return [bytes(part) if type(part) is bytearray else part for part in w.finish(out)]


def decode_response(api_key, api_version, frame):
    """Decode a response frame (without its size prefix): (correlation_id, body).

    Like Kafka's clients, an ApiVersions response that does not parse in the requested version is
    read as v0 (the KIP-511 UNSUPPORTED_VERSION answer of an older broker)."""
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"unknown api key {api_key}")
    buf = as_view(frame)
    header, pos = _decode(ResponseHeader, response_header_version(api_key, api_version), buf, 0)
    try:
        body, _ = _decode(cls, api_version, buf, pos)
    except DecodeError:
        if api_key != API_VERSIONS_KEY or api_version == 0:
            raise
        # KIP-511: a broker that does not know our ApiVersions version answers in v0 format
        body, _ = _decode(cls, 0, buf, pos)
    return header.correlation_id, body


def _join(parts):
    if len(parts) == 1:
        return bytes(parts[0])
    try:
        return b"".join(parts)
    except TypeError:
        raise EncodeError("a records slot is not a buffer; use encode_response_parts") from None
