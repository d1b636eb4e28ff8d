"""Hypothesis strategies that build message bodies from their construct schemas."""

import math
import uuid

from hypothesis import strategies as st

from protocol import wire

_INT_RANGES = {"b": 8, "h": 16, "i": 32, "q": 64}


def _fixed(wire_type):
    fmt = wire_type.fmt
    if fmt in _INT_RANGES:
        bits = _INT_RANGES[fmt]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if fmt == "H":
        return st.integers(0, 2 ** 16 - 1)
    if fmt == "I":
        return st.integers(0, 2 ** 32 - 1)
    if fmt == "?":
        return st.booleans()
    if fmt == "d":
        return st.floats(allow_nan=False)
    raise AssertionError(fmt)


def value_strategy(wire_type, depth=0):
    if isinstance(wire_type, wire.Fixed):
        return _fixed(wire_type)
    if isinstance(wire_type, wire.Uuid):
        return st.uuids().map(lambda u: u) | st.just(wire.ZERO_UUID)
    if isinstance(wire_type, wire.Message):
        return body_strategy(wire_type, depth + 1)
    if isinstance(wire_type, wire.NullableStruct):
        return st.none() | body_strategy(wire_type.message, depth + 1)
    if isinstance(wire_type, wire.Array):
        size = 3 if depth < 2 else 1
        inner = st.lists(value_strategy(wire_type.element, depth + 1), max_size=size)
        return st.none() | inner if wire_type.nullable else inner
    if isinstance(wire_type, wire.String):
        inner = st.text(max_size=12)
    elif isinstance(wire_type, wire.Bytes):  # includes Records
        inner = st.binary(max_size=24)
    else:
        raise AssertionError(wire_type)
    return st.none() | inner if wire_type.nullable else inner


def _unknown_tags(schema):
    known = [tag for tag, *_ in schema.tagged]
    first = max(known, default=-1) + 1
    return st.lists(st.integers(first, first + 50), max_size=2, unique=True).flatmap(
        lambda tags: st.tuples(*[st.tuples(st.just(t), st.binary(max_size=6)) for t in sorted(tags)])
    ).map(lambda items: list(items) or None)


def body_strategy(schema, depth=0):
    """Bodies valid for one version: present and tagged fields random, absent ones at their default."""
    kwargs = {attr: value_strategy(t, depth) for attr, t in schema.fields}
    for _, attr, t, _default in schema.tagged:
        kwargs[attr] = value_strategy(t, depth)
    for attr, default, _ in schema.absent:
        kwargs[attr] = st.builds(wire._fresh, st.just(default))
    if schema.flexible:
        kwargs["_unknown_tagged_fields"] = _unknown_tags(schema)
    return st.fixed_dictionaries(kwargs).map(lambda kw: schema.cls(**kw))


def empty_body(schema, nulls):
    """Every present field at its emptiest: null where nullable (if `nulls`), else empty/zero."""
    kwargs = {}
    for attr, t in schema.fields:
        kwargs[attr] = _empty(t, nulls)
    return schema.cls(**kwargs)


def _empty(t, nulls):
    if isinstance(t, wire.Fixed):
        return False if t.fmt == "?" else 0
    if isinstance(t, wire.Uuid):
        return wire.ZERO_UUID
    if isinstance(t, wire.Message):
        return empty_body(t, nulls)
    if isinstance(t, wire.NullableStruct):
        return None if nulls else empty_body(t.message, nulls)
    if nulls and t.nullable:
        return None
    if isinstance(t, wire.Array):
        return []
    return "" if isinstance(t, wire.String) else b""
