"""Topic rules: legal names and collisions (replica placement: `placement`)."""

from __future__ import annotations

import re

from .errors import ApiError, ErrorCode

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str | None) -> None:
    """Kafka's topic name rules (and its controller's wording); raises ApiError(INVALID_TOPIC_EXCEPTION)."""
    if not name:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: '{name}' is not allowed")
    if len(name) > MAX_NAME_LENGTH:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic name is invalid: the length of '{name}' is longer than the max allowed "
                       f"length {MAX_NAME_LENGTH}")
    if not _LEGAL.fullmatch(name):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic name is invalid: '{name}' contains one or more characters other than "
                       "ASCII alphanumerics, '.', '_' and '-'")


def collision_key(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses topics differing only by them."""
    return name.replace(".", "_")
