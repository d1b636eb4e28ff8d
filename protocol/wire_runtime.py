"""Runtime helpers the compiled codecs call: varints, lengths, uuids, tag sections, and the
parse/build state objects. Offset-based over memoryviews; nothing here allocates more than the frame
holds. `protocol.wire` re-exports every name, and the compiled code imports them from there.
"""

import struct
import uuid

from protocol.errors import DecodeError, EncodeError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_UVARINT_SMALL = [bytes([i]) for i in range(128)]


def read_uvarint(buf, pos):
    """Unsigned varint of at most 5 bytes (a Kafka int32)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    for i in range(1, 5):
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    raise DecodeError("unsigned varint longer than 5 bytes")


def read_uvarlong(buf, pos):
    """Unsigned varint of at most 10 bytes (a Kafka int64)."""
    value = 0
    shift = 0
    for i in range(10):
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    raise DecodeError("unsigned varlong longer than 10 bytes")


def read_varint(buf, pos):
    """Zig-zag signed varint of at most 5 bytes."""
    u, pos = read_uvarint(buf, pos)
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(buf, pos):
    """Zig-zag signed varint of at most 10 bytes."""
    u, pos = read_uvarlong(buf, pos)
    return (u >> 1) ^ -(u & 1), pos


def uvarint(value):
    """Encode an unsigned varint."""
    if 0 <= value < 0x80:
        return _UVARINT_SMALL[value]
    if value < 0:
        raise EncodeError(f"negative unsigned varint {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value):
    """Encode a zig-zag signed varint (int32 or int64)."""
    return uvarint((value << 1) ^ (value >> 63))


def read_uuid(buf, pos, end):
    if end - pos < 16:
        raise DecodeError("truncated uuid")
    return uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16


def write_length(out, n, compact, what):
    if what == "string" and n > 0x7FFF:
        raise EncodeError(f"string of {n} bytes is too long")
    if compact:
        out += uvarint(n + 1)
    elif what == "string":
        out += _I16.pack(n)
    else:
        out += _I32.pack(n)


_INLINE_TYPES = (bytes, bytearray, memoryview)
SPLIT_THRESHOLD = 4096


def write_records(w, out, value, compact, nullable):
    """Write a records field; a slot object (or a large buffer when splitting) becomes its own part."""
    if value is None:
        if not nullable:
            raise EncodeError("null for non-nullable records")
        write_length(out, -1, compact, "records")
        return out
    n = len(value)
    write_length(out, n, compact, "records")
    if type(value) in _INLINE_TYPES and (n < SPLIT_THRESHOLD or not w.split):
        out += value
        return out
    w.parts.append(out)
    w.parts.append(value)
    return bytearray()


def write_uuid(out, value):
    out += value.bytes


def read_tag_header(buf, pos, end):
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    if size > end - pos:
        raise DecodeError(f"tagged field {tag} of {size} bytes exceeds the {end - pos} bytes left")
    return tag, pos + size, pos


def read_unknown_tags(buf, pos, end, obj):
    """A tag section of a struct that knows no tags in this version: keep them all, as (tag, bytes)."""
    ntags, pos = read_uvarint(buf, pos)
    if ntags > end - pos:
        raise DecodeError("tag count exceeds the frame")
    unknown = obj._unknown_tagged_fields = []
    for _ in range(ntags):
        tag, stop, pos = read_tag_header(buf, pos, end)
        unknown.append((tag, bytes(buf[pos:stop])))
        pos = stop
    return pos


def write_tag_section(out, known, unknown):
    """Tagged fields in ascending tag order: known [(tag, data)] merged with preserved unknown ones."""
    tags = list(known or ())
    if unknown:
        seen = {tag for tag, _ in tags}
        tags.extend((tag, data) for tag, data in unknown if tag not in seen)
        tags.sort(key=lambda item: item[0])
    out += uvarint(len(tags))
    for tag, data in tags:
        out += uvarint(tag)
        out += uvarint(len(data))
        out += data


def absent_field_error(cls, attr, version_note):
    return EncodeError(f"{cls.__qualname__}.{attr} has a non-default value but is absent {version_note}")


class Writer:
    """Build state: finished chunks and whether large record buffers travel as their own parts."""

    __slots__ = ("parts", "split")

    def __init__(self, split=False):
        self.parts = []
        self.split = split

    def finish(self, out):
        parts = self.parts
        if out:
            parts.append(out)
        return parts


class Reader:
    """Parse state for construct's compiled entry point: a memoryview and a position."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, data):
        self.buf = as_view(data)
        self.pos = 0
        self.end = len(self.buf)


def as_view(data):
    """A flat byte memoryview over a frame (no copy)."""
    if type(data) is bytes or type(data) is bytearray:
        return memoryview(data)
    view = data if type(data) is memoryview else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view
