"""Small helpers shared by the handlers: topic rules, auto-creation."""

from __future__ import annotations

import logging

from broker.controller.errors import ApiError
from broker.controller.topics import validate_topic_name

log = logging.getLogger("odradek.handlers")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

# KIP-430: an authorized-operations field the client did not ask for (broker.security.access
# computes the ones it did).
OPERATIONS_NOT_REQUESTED = -(2**31)


def is_internal(name: str | None) -> bool:
    return name in INTERNAL_TOPICS


def topic_name_error(name: str | None) -> str | None:
    """Why a topic name is illegal (Kafka's rules), or None when it is fine."""
    try:
        validate_topic_name(name)
    except ApiError as exc:
        return exc.message or str(exc)
    return None


async def create_topics_with_defaults(ctx, names: list[str]) -> None:
    """Auto-create topics with the broker's num.partitions / default.replication.factor."""
    from broker.controller.controller import CreateTopicSpec

    results = await ctx.controller.create_topics([CreateTopicSpec(name=name) for name in names])
    for result in results:
        if result.error_code and result.error_code != 36:   # 36: created concurrently, fine
            log.warning("auto-creating topic %s failed: %s", result.name, result.error_message)
