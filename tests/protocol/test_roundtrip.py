"""Every (message, version) round-trips: random bodies, empty and all-null bodies, compiled vs interpreted."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.generated import internal, messages, metadata
from protocol.wire import Writer

from .bodies import body_strategy, empty_body

ALL = messages.ALL + internal.ALL + metadata.ALL
CASES = [(cls, version) for cls in ALL for version in sorted(cls.SCHEMAS)]
IDS = [f"{cls.NAME}-v{version}" for cls, version in CASES]


def _encode(schema, body):
    compiled = schema.compiled()
    return bytes(compiled.build_fast(Writer(), bytearray(), body))


def _decode(schema, data):
    body, pos = schema.compiled().parse_fast(memoryview(data), 0, len(data))
    assert pos == len(data), "decoder left bytes unread"
    return body


def _check(schema, body):
    data = _encode(schema, body)
    decoded = _decode(schema, data)
    assert decoded == body
    assert _encode(schema, decoded) == data, "re-encoding the decoded body changed the bytes"
    # construct's interpreted path agrees with the compiled one
    assert schema.build(body) == data
    assert schema.parse(data) == body


@pytest.mark.parametrize("cls, version", CASES, ids=IDS)
def test_empty_and_null_bodies(cls, version):
    schema = cls.SCHEMAS[version]
    _check(schema, cls())
    _check(schema, empty_body(schema, nulls=False))
    _check(schema, empty_body(schema, nulls=True))


@pytest.mark.parametrize("cls, version", CASES, ids=IDS)
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_random_bodies(cls, version, data):
    schema = cls.SCHEMAS[version]
    _check(schema, data.draw(body_strategy(schema)))


@pytest.mark.parametrize("cls, version", CASES[::7], ids=IDS[::7])
def test_construct_compiled_api_matches(cls, version):
    """`schema.compile()` is a regular construct Compiled: parse(bytes) / build(obj) work as usual."""
    schema = cls.SCHEMAS[version]
    body = empty_body(schema, nulls=False)
    data = schema.build(body)
    compiled = schema.compile()
    assert compiled.build(body) == data
    assert compiled.parse(data) == body
    assert compiled.parse(data + b"trailing") == body


def test_primitives_compile_on_their_own():
    from protocol import wire

    for wire_type, value in [(wire.INT32, -5), (wire.String(True, True), None), (wire.String(False, False), "é"),
                             (wire.Array(wire.INT64, True, False), [1, 2]), (wire.UUID, wire.ZERO_UUID)]:
        data = wire_type.build(value)
        assert wire_type.compile().parse(data) == wire_type.parse(data) == value
        assert wire_type.compile().build(value) == data
