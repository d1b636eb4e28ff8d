"""Base class of the generated message bodies."""

DEFAULT = type("Default", (), {"__repr__": lambda self: "DEFAULT", "__slots__": ()})()
"""Marker for keyword arguments whose default is a fresh mutable value (list or struct)."""


class Body:
    """A generated message or struct: snake_case attributes, keyword construction, value equality.

    `_unknown_tagged_fields` holds tagged fields this codec does not know, as (tag, bytes),
    so that they survive a decode/encode round trip.
    """

    __slots__ = ()

    def __eq__(self, other):
        if type(self) is not type(other):
            return NotImplemented
        for name in self.__slots__:
            if name != "_unknown_tagged_fields" and getattr(self, name) != getattr(other, name):
                return False
        return True

    __hash__ = None

    def __repr__(self):
        fields = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__slots__ if name != "_unknown_tagged_fields"
        )
        return f"{type(self).__qualname__}({fields})"

    def to_dict(self):
        """A plain-data view (nested bodies become dicts), handy for logs and tests."""
        return {
            name: _plain(getattr(self, name)) for name in self.__slots__ if name != "_unknown_tagged_fields"
        }


def _plain(value):
    if isinstance(value, Body):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value
