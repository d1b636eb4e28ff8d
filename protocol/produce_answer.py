"""The common Produce answer — one topic, one partition, nothing optional set — encoded with a
few ``struct`` packs instead of the generated encoder.

An unbatched producer gets one such answer per record, so its encoding is per-record cost
(bench/PROFILE.md, issue 21). The bytes are exactly what the generated encoder writes (a test
holds every version to it); any other shape returns None and takes the generic path.
"""

from __future__ import annotations

import struct

from protocol.generated.messages import RESPONSES

ProduceResponse = RESPONSES[0]
_FLEXIBLE_FROM = ProduceResponse.FLEXIBLE_FROM
_MAX_VERSION = ProduceResponse.VALID_VERSIONS[1]

# What precedes the topic name: correlation id, then (flexible) no header tags and a compact
# count of one topic and the name's compact length, or an int32 count of one and an int16 length.
_FLEXIBLE_HEAD = struct.Struct(">iBBB")
_HEAD = struct.Struct(">iih")
# After the name, per version: the partition count (one), the partition, then the throttle time;
# flexible versions add an empty record_errors (compact 1), a null error_message (0) and no tags
# for partition, topic and body.
_FLEXIBLE_PARTITION = struct.Struct(">BihqqqBBBBiB")        # v9-11
_PARTITION_BY_VERSION = {
    0: struct.Struct(">iihq"),
    1: struct.Struct(">iihqi"),
    **dict.fromkeys((2, 3, 4), struct.Struct(">iihqqi")),
    **dict.fromkeys((5, 6, 7), struct.Struct(">iihqqqi")),
    8: struct.Struct(">iihqqqihi"),                          # + record_errors [], error_message null
}


def encode_produce_response(api_version: int, correlation_id: int, body) -> bytes | None:
    """The response (header + body, no size prefix), or None when `body` is not the common shape."""
    if (type(body) is not ProduceResponse or body._unknown_tagged_fields or body.node_endpoints
            or api_version > _MAX_VERSION):
        return None
    responses = body.responses
    if len(responses) != 1:
        return None
    topic = responses[0]
    partitions = topic.partition_responses
    if len(partitions) != 1 or topic._unknown_tagged_fields:
        return None
    answer = partitions[0]
    leader = answer.current_leader
    if (answer.record_errors or answer.error_message is not None or answer._unknown_tagged_fields
            or leader is None or leader.leader_id != -1 or leader.leader_epoch != -1
            or leader._unknown_tagged_fields):
        return None
    name = topic.name.encode("utf-8")
    try:
        if api_version >= _FLEXIBLE_FROM:
            if len(name) >= 127:   # a multi-byte compact length: left to the generic encoder
                return None
            return (_FLEXIBLE_HEAD.pack(correlation_id, 0, 2, len(name) + 1) + name
                    + _FLEXIBLE_PARTITION.pack(2, answer.index, answer.error_code,
                                               answer.base_offset, answer.log_append_time_ms,
                                               answer.log_start_offset, 1, 0, 0, 0,
                                               body.throttle_time_ms, 0))
        partition = _PARTITION_BY_VERSION.get(api_version)
        if partition is None:
            return None
        head = _HEAD.pack(correlation_id, 1, len(name)) + name
        if api_version >= 8:
            return head + partition.pack(1, answer.index, answer.error_code, answer.base_offset,
                                         answer.log_append_time_ms, answer.log_start_offset,
                                         0, -1, body.throttle_time_ms)
        if api_version >= 5:
            return head + partition.pack(1, answer.index, answer.error_code, answer.base_offset,
                                         answer.log_append_time_ms, answer.log_start_offset,
                                         body.throttle_time_ms)
        if api_version >= 2:
            return head + partition.pack(1, answer.index, answer.error_code, answer.base_offset,
                                         answer.log_append_time_ms, body.throttle_time_ms)
        if api_version == 1:
            return head + partition.pack(1, answer.index, answer.error_code, answer.base_offset,
                                         body.throttle_time_ms)
        return head + partition.pack(1, answer.index, answer.error_code, answer.base_offset)
    except struct.error:   # a value out of range (or a name over 32767 bytes): the generic
        return None        # encoder reports it as an EncodeError
