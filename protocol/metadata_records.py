"""KRaft metadata log records: unsigned varints frame version (1), record type, version; then the body.

`RECORD_TYPES` maps record type (the spec's apiKey) to its generated class.
"""

from protocol.codec import _decode
from protocol.errors import DecodeError, UnsupportedVersionError
from protocol.generated.metadata import RECORDS as RECORD_TYPES
from protocol.versioned import encode_data, highest_version
from protocol.wire import as_view, read_uvarint, uvarint

FRAME_VERSION = 1


def encode_metadata_record(body, version=None):
    cls = type(body)
    version = highest_version(cls) if version is None else version
    return uvarint(FRAME_VERSION) + uvarint(cls.API_KEY) + uvarint(version) + encode_data(body, version)


def decode_metadata_record(data):
    """(body, version) of one serialized metadata record."""
    buf = as_view(data)
    try:
        frame, pos = read_uvarint(buf, 0)
        record_type, pos = read_uvarint(buf, pos)
        version, pos = read_uvarint(buf, pos)
    except IndexError:
        raise DecodeError("truncated metadata record header") from None
    if frame != FRAME_VERSION:
        raise DecodeError(f"unknown metadata record frame version {frame}")
    cls = RECORD_TYPES.get(record_type)
    if cls is None:
        raise UnsupportedVersionError(f"unknown metadata record type {record_type}")
    body, _ = _decode(cls, version, buf, pos)
    return body, version
