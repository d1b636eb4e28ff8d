"""The classic consumer protocol's embedded bytes, the range assignor and the default partitioner.

* JoinGroup member metadata is a ``ConsumerProtocolSubscription`` and SyncGroup assignments a
  ``ConsumerProtocolAssignment``: a big-endian int16 version followed by non-flexible fields. Newer
  versions only append fields, so decoding reads the fields we know and ignores the rest.
* :func:`range_assign` is Kafka's RangeAssignor (partitions of each topic split into contiguous
  ranges over the members subscribed to it, sorted by member id).
* :func:`murmur2_partition` is the Java client's default partitioner for keyed records, so a
  record produced here with a key lands where the Java producer would put it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Reader:
    def __init__(self, data: bytes):
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("consumer protocol data is truncated")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode("utf-8")

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def array(self, item) -> list:
        n = self.i32()
        return [] if n < 0 else [item() for _ in range(n)]

    @property
    def done(self) -> bool:
        return self.pos >= len(self.data)


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    raw = value.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    return _I32.pack(-1) if value is None else _I32.pack(len(value)) + value


def _topic_partitions(assignment: Mapping[str, Sequence[int]]) -> bytes:
    out = [_I32.pack(len(assignment))]
    for topic, partitions in sorted(assignment.items()):
        out.append(_string(topic))
        out.append(_I32.pack(len(partitions)))
        out.extend(_I32.pack(p) for p in partitions)
    return b"".join(out)


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None) -> bytes:
    """A version-0 subscription (what every broker and assignor understands)."""
    topics = sorted(set(topics))
    return (_I16.pack(0) + _I32.pack(len(topics)) + b"".join(_string(t) for t in topics)
            + _bytes(user_data))


def decode_subscription(data: bytes) -> list[str]:
    r = _Reader(data)
    r.i16()
    return [t for t in r.array(r.string) if t is not None]


def encode_assignment(assignment: Mapping[str, Sequence[int]], user_data: bytes | None = None) -> bytes:
    return _I16.pack(0) + _topic_partitions(assignment) + _bytes(user_data)


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    """topic -> partitions; empty bytes (a member without partitions) decode to {}."""
    if not data:
        return {}
    r = _Reader(data)
    r.i16()
    out: dict[str, list[int]] = {}
    for topic, partitions in r.array(lambda: (r.string(), r.array(r.i32))):
        out.setdefault(topic or "", []).extend(partitions)
    r.bytes_()  # user data: present in every version, so a truncated assignment fails here
    return out


def range_assign(subscriptions: Mapping[str, Sequence[str]],
                 partition_counts: Mapping[str, int]) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: member id -> topic -> partitions."""
    result: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    by_topic: dict[str, list[str]] = {}
    for member, topics in subscriptions.items():
        for topic in topics:
            by_topic.setdefault(topic, []).append(member)
    for topic, members in by_topic.items():
        count = partition_counts.get(topic, 0)
        members = sorted(members)
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                result[member][topic] = list(range(start, start + n))
            start += n
    return result


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash with the seed and constants of Kafka's Utils.murmur2."""
    length = len(data)
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
