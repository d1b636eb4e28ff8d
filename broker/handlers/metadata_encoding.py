"""Metadata answers at scale: each topic encoded once per change, the answer assembled in slices.

A full Metadata answer at 10,000 partitions is ~250 KiB; building and encoding it struct by struct held
the event loop for 20–60 ms per request (and a client polling metadata every 100 ms then delayed
everyone else's requests). A topic's bytes depend only on its image (immutable: a new object per
change), the live brokers and the request version, so they are cached on those and spliced into the
response (`protocol.metadata_answer`). Encoding what the cache lacks (after a CreateTopics, a leader
change) yields to the loop every `SLICE_WORK` partitions, so no answer holds it for long.
"""

from __future__ import annotations

import trio

from protocol import messages
from protocol.metadata_answer import EncodedTopicsResponse, encode_topic

Response = messages.MetadataResponse
# Partitions (plus one per topic) encoded or looked up between two checkpoints: ~2 ms of work here.
SLICE_WORK = 1000


class _Error:
    """One non-zero error code inside the encoded topics, for the broker's error counting."""

    __slots__ = ("error_code",)

    def __init__(self, error_code: int):
        self.error_code = error_code


# topic name -> (its TopicImage, the live brokers, {version: (encoded bytes, [_Error])})
_encoded: dict[str, tuple] = {}


def _errors_of(entry) -> list:
    errors = [_Error(entry.error_code)] if entry.error_code else []
    errors.extend(_Error(p.error_code) for p in entry.partitions if p.error_code)
    return errors


def cached_topic(topic, live: frozenset, version: int):
    """(bytes, errors) of `topic` at `version` if encoded since its last change, else None."""
    cached = _encoded.get(topic.name)
    if cached is None or cached[0] is not topic or cached[1] != live:
        return None
    return cached[2].get(version)


def encode_and_cache(topic, live: frozenset, version: int, entry, topics_in_image: int):
    """Encode `entry` (the MetadataResponseTopic of `topic`) and keep it for the next answers."""
    encoded = (encode_topic(version, entry), _errors_of(entry))
    cached = _encoded.get(topic.name)
    if cached is None or cached[0] is not topic or cached[1] != live:
        if len(_encoded) > 2 * topics_in_image + 64:
            _encoded.clear()   # deleted topics: let their bytes go
        cached = _encoded[topic.name] = (topic, live, {})
    cached[2][version] = encoded
    return encoded


async def encoded_answer(head, version: int, answers, live: frozenset, topics_in_image: int,
                         build_entry) -> EncodedTopicsResponse:
    """The response for `answers` (topic images, or MetadataResponseTopic error entries), in order.

    `build_entry(topic)` makes a topic's MetadataResponseTopic when the cache lacks it."""
    parts: list[bytes] = []
    errors: list = []
    work = 0
    for item in answers:
        if type(item) is Response.MetadataResponseTopic:   # an error entry: tiny, never cached
            parts.append(encode_topic(version, item))
            errors.extend(_errors_of(item))
            work += 1
        else:
            encoded = cached_topic(item, live, version)
            if encoded is None:
                encoded = encode_and_cache(item, live, version, build_entry(item), topics_in_image)
                work += len(item.partitions)
            parts.append(encoded[0])
            errors.extend(encoded[1])
            work += 1
        if work >= SLICE_WORK:
            work = 0
            await trio.lowlevel.checkpoint()
    return EncodedTopicsResponse(head, parts, errors)

