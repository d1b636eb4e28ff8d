"""The Produce answer template (protocol/produce_answer.py) writes exactly what the generated
encoder writes, for every version and field value, and leaves every other shape to it."""

import itertools

import pytest

import protocol
from protocol.codec import generic_response_parts
from protocol.messages import ProduceResponse as R
from protocol.produce_answer import encode_produce_response

VERSIONS = range(R.VALID_VERSIONS[0], R.VALID_VERSIONS[1] + 1)


def _body(name="orders", index=3, error_code=0, base_offset=41, append_time=-1, start_offset=0,
          throttle=0, **partition):
    answer = R.PartitionProduceResponse(index=index, error_code=error_code, base_offset=base_offset,
                                        log_append_time_ms=append_time,
                                        log_start_offset=start_offset, **partition)
    return R(responses=[R.TopicProduceResponse(name=name, partition_responses=[answer])],
             throttle_time_ms=throttle)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("values", [
    {},
    {"name": "t", "index": 0, "base_offset": 0, "start_offset": -1},
    {"name": "x" * 126, "error_code": 6, "base_offset": -1, "append_time": 1_700_000_000_000,
     "start_offset": 2**62, "throttle": 250, "index": 2**31 - 1},
    {"name": "ünïcödé-topic", "error_code": -1, "base_offset": 2**63 - 1},
    {"name": "", "index": -1, "throttle": -5},
])
def test_template_matches_generated_encoder(version, values):
    body = _body(**values)
    data = encode_produce_response(version, 123456789, body)
    assert data is not None
    assert [data] == generic_response_parts(0, version, 123456789, body)
    correlation_id, decoded = protocol.decode_response(0, version, data)
    assert correlation_id == 123456789
    assert decoded.responses[0].partition_responses[0].base_offset == body.responses[0] \
        .partition_responses[0].base_offset


@pytest.mark.parametrize("version", VERSIONS)
def test_other_shapes_take_the_generated_encoder(version):
    two_partitions = _body()
    two_partitions.responses[0].partition_responses.append(
        R.PartitionProduceResponse(index=9, error_code=0, base_offset=1))
    two_topics = _body()
    two_topics.responses.append(R.TopicProduceResponse(name="other"))
    shapes = [
        two_partitions, two_topics, R(responses=[]),
        _body(error_message="bad batch"),
        _body(error_code=87, record_errors=[R.BatchIndexAndErrorMessage(batch_index=0)]),
        _body(current_leader=R.LeaderIdAndEpoch(leader_id=2, leader_epoch=7)),
        _body(error_code=2**15),                    # out of range: the generic encoder's error
    ]
    if version >= R.FLEXIBLE_FROM:
        shapes.insert(0, _body(name="y" * 127))     # a two-byte compact length
    for body in shapes:
        assert encode_produce_response(version, 1, body) is None
    with_endpoints = _body()
    with_endpoints.node_endpoints = [R.NodeEndpoint(node_id=1, host="h", port=9092)]
    assert encode_produce_response(version, 1, with_endpoints) is None
    # ... and encode_response_parts still answers them as before (or refuses as before)
    for body in shapes[:-1]:
        if version < 10 and body.responses and body.responses[0].partition_responses and \
                body.responses[0].partition_responses[0].current_leader.leader_id != -1:
            continue   # current_leader is not in these versions: the encoder refuses, as before
        assert protocol.encode_response_parts(0, version, 1, body) == \
            generic_response_parts(0, version, 1, body)
    with pytest.raises(protocol.EncodeError):
        protocol.encode_response_parts(0, version, 1, shapes[-1])


@pytest.mark.parametrize("version", VERSIONS)
def test_long_names_in_every_version(version):
    for length in (126, 127, 128, 300):
        body = _body(name="n" * length)
        data = encode_produce_response(version, 5, body)
        if data is not None:
            assert [data] == generic_response_parts(0, version, 5, body)
        assert protocol.encode_response_parts(0, version, 5, body) == \
            generic_response_parts(0, version, 5, body)


def test_versions_we_do_not_know_are_left_to_the_generated_encoder():
    assert encode_produce_response(R.VALID_VERSIONS[1] + 1, 1, _body()) is None
    assert encode_produce_response(-1, 1, _body()) is None


def test_every_error_code_and_offset_combination_round_trips():
    for version, code, offset in itertools.product(VERSIONS, (0, 1, 6, 10, 19, 45, 67), (0, 1, 2**40)):
        body = _body(error_code=code, base_offset=offset)
        assert [encode_produce_response(version, 7, body)] == generic_response_parts(0, version, 7, body)
