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

_INT32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ihq")            # index, error code, base offset
_INT64 = struct.Struct(">q")
_ONE = _INT32.pack(1)                         # an int32 array count of one (topic, partition)
_EMPTY_ERRORS_AND_NULL_MESSAGE = b"\x00\x00\x00\x00\xff\xff"    # v8: record_errors [], error_message null
_FLEXIBLE_PARTITION_TAIL = b"\x01\x00\x00\x00"   # record_errors [], error_message null, no tags (partition, topic)


def encode_produce_response(api_version: int, correlation_id: int, body) -> bytes | None:
    """The response (header + body, no size prefix), or None when `body` is not the common shape."""
    if type(body) is not ProduceResponse or body._unknown_tagged_fields or body.node_endpoints:
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
    flexible = api_version >= _FLEXIBLE_FROM
    if flexible:
        if len(name) >= 127:   # a multi-byte compact length: leave it to the generic encoder
            return None
        out = bytearray(_INT32.pack(correlation_id))
        out += b"\x00\x02"                 # response header tags; one topic (compact count 1 + 1)
        out.append(len(name) + 1)
        out += name
        out.append(2)                      # one partition
    else:
        if len(name) > 0x7FFF:
            return None
        out = bytearray(_INT32.pack(correlation_id))
        out += _ONE
        out += len(name).to_bytes(2, "big")
        out += name
        out += _ONE
    try:
        out += _PARTITION.pack(answer.index, answer.error_code, answer.base_offset)
        if api_version >= 2:
            out += _INT64.pack(answer.log_append_time_ms)
        if api_version >= 5:
            out += _INT64.pack(answer.log_start_offset)
        if flexible:
            out += _FLEXIBLE_PARTITION_TAIL
        elif api_version >= 8:
            out += _EMPTY_ERRORS_AND_NULL_MESSAGE
        if api_version >= 1:
            out += _INT32.pack(body.throttle_time_ms)
    except struct.error:   # out of range: the generic encoder says so as an EncodeError
        return None
    if flexible:
        out.append(0)                      # no body tags
    return bytes(out)
