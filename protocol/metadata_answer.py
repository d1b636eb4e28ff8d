"""A Metadata response assembled from topics encoded beforehand.

At 10,000 partitions a full Metadata answer is ~250 KiB; encoding it struct by struct for every request
held the broker's event loop for tens of milliseconds. A topic's bytes depend only on the topic, the
live brokers and the request version, so the broker encodes each topic once (`encode_topic`) and
answers with `EncodedTopicsResponse`: the response's small head (throttle time, brokers, cluster id,
controller) encoded per request, the topics spliced in as they are.

The splice rests on the layout Kafka's spec gives MetadataResponse: the topics array is the last field
but `ClusterAuthorizedOperations` (v8–v10) and the tagged fields (v9+); `tests/protocol` compares the
result with the generated encoder's for every version.
"""

from __future__ import annotations

import struct

from protocol.codec import PreEncodedBody, encode_response
from protocol.generated.messages import MetadataResponse
from protocol.wire_runtime import uvarint

API_KEY = 3
FLEXIBLE_FROM = 9
_INT32 = struct.Struct(">i")


def _tail_size(version: int) -> int:
    """Bytes after the topics array: cluster authorized operations (v8–v10), tagged fields (v9+)."""
    return (4 if 8 <= version <= 10 else 0) + (1 if version >= FLEXIBLE_FROM else 0)


def _array_header(version: int, count: int) -> bytes:
    return uvarint(count + 1) if version >= FLEXIBLE_FROM else _INT32.pack(count)


_EMPTY: dict[int, bytes] = {}   # version -> an encoded empty response (the frame for one topic)


def encode_topic(version: int, topic) -> bytes:
    """One MetadataResponseTopic's bytes at `version`, as they sit inside the topics array."""
    empty = _EMPTY.get(version)
    if empty is None:
        empty = _EMPTY[version] = encode_response(API_KEY, version, 0, MetadataResponse())
    one = encode_response(API_KEY, version, 0, MetadataResponse(topics=[topic]))
    start = len(empty) - _tail_size(version)   # the (one-byte or four-byte) count included
    return one[start:len(one) - _tail_size(version)]


class EncodedTopicsResponse(PreEncodedBody):
    """A MetadataResponse whose topics are given encoded (`encode_topic`, same version).

    `head` is a MetadataResponse without topics (quotas may still set its throttle time);
    `errors` holds one object with an ``error_code`` per non-zero error inside the topics, so the
    broker's error counting (which walks lists of structs) sees them without decoding anything.
    """

    __slots__ = ("head", "topic_parts", "errors")

    def __init__(self, head, topic_parts: list[bytes], errors: list):
        self.head = head
        self.topic_parts = topic_parts
        self.errors = errors

    @property
    def throttle_time_ms(self) -> int:
        return self.head.throttle_time_ms

    @throttle_time_ms.setter
    def throttle_time_ms(self, value: int) -> None:
        self.head.throttle_time_ms = value

    def encode_parts(self, api_version: int, correlation_id: int) -> list:
        if self.head.topics:
            raise ValueError("the head of an EncodedTopicsResponse carries no topics")
        framed = encode_response(API_KEY, api_version, correlation_id, self.head)
        tail = _tail_size(api_version)
        cut = len(framed) - tail - len(_array_header(api_version, 0))
        return [framed[:cut], _array_header(api_version, len(self.topic_parts)), *self.topic_parts,
                framed[len(framed) - tail:]]
