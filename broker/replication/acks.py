"""When an acks=all Produce may be answered (Kafka's Partition.checkEnoughReplicasReachOffset).

Sans-IO, shared by the produce purgatory and the replication simulation.
"""

from __future__ import annotations

from protocol import ErrorCode


def acks_all_outcome(required_offset: int, high_watermark: int, isr_size: int,
                     min_insync_replicas: int) -> ErrorCode | None:
    """None while the high watermark is below `required_offset` (the end of the appended
    batches); then NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
    min.insync.replicas meanwhile (the records are in the log but not as safe as asked)."""
    if high_watermark < required_offset:
        return None
    if isr_size < min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return ErrorCode.NONE
