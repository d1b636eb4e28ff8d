"""Encode/decode any generated data body in a given version, bare or behind an int16 version."""

import struct

from protocol.codec import _decode, _encode
from protocol.errors import DecodeError, UnsupportedVersionError
from protocol.wire import Writer, as_view

_VERSION = struct.Struct(">h")


def highest_version(cls):
    return cls.VALID_VERSIONS[1]


def encode_data(body, version=None):
    """The body's bytes in `version` (default: the highest the spec knows), without any prefix."""
    cls = type(body)
    version = highest_version(cls) if version is None else version
    w = Writer()
    out = _encode(cls, version, w, bytearray(), body)
    return bytes(out) if not w.parts else b"".join(w.finish(out))


def decode_data(cls, version, data, offset=0):
    """Decode a bare body of `cls` in `version`; trailing bytes are ignored (Kafka does the same)."""
    body, _ = _decode(cls, version, as_view(data), offset)
    return body


def encode_versioned(body, version=None):
    """int16 version, then the body (the layout of internal-topic keys/values and consumer metadata)."""
    cls = type(body)
    version = highest_version(cls) if version is None else version
    return _VERSION.pack(version) + encode_data(body, version)


def read_version(data):
    try:
        return _VERSION.unpack_from(as_view(data), 0)[0]
    except struct.error:
        raise DecodeError("too short for a version prefix") from None


def decode_versioned(cls, data, clamp=False):
    """(version, body) from an int16-version-prefixed body. With `clamp`, versions newer than the
    spec's highest are read with the highest (forward compatibility, as Kafka's consumer protocol)."""
    version = read_version(data)
    low, high = cls.VALID_VERSIONS
    if clamp and version > high:
        version = high
    if not low <= version <= high:
        raise UnsupportedVersionError(f"{cls.NAME} has no version {version}")
    return version, decode_data(cls, version, data, 2)
