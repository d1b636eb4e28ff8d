"""Where a follower's log leaves its leader's: both sides of KIP-101/KIP-595 truncation.

Sans-IO over anything with ``log_end_offset``, ``high_watermark``, ``latest_epoch`` and
``end_offset_for_epoch(epoch) -> (epoch, end offset)`` (a storage Log, or the simulation's log).

- Leader side (``diverging_epoch``): a follower fetching at ``fetch_offset`` whose last fetched batch
  was of ``last_fetched_epoch`` has diverged when the leader's copy of that epoch ends before the
  fetch offset, or the leader knows only an older epoch there: the Fetch response then carries
  DivergingEpoch (epoch, end offset) and no records.
- Follower side (``truncation_offset``): given the leader's (epoch, end offset) for the follower's
  epoch, the offset to truncate to, and whether that settles it (else the follower fetches again
  with its new last epoch and the leader checks once more), as Kafka's getOffsetTruncationState.
"""

from __future__ import annotations

from typing import NamedTuple

UNDEFINED = -1


class Truncation(NamedTuple):
    offset: int
    completed: bool


def diverging_epoch(log, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
    """The DivergingEpoch for a follower's fetch, or None when its log is a prefix of ours."""
    if last_fetched_epoch < 0:
        return None
    if last_fetched_epoch == log.latest_epoch:
        # The common case, without the lock and the search: our latest epoch ends at our end.
        end_offset = log.log_end_offset
        return None if fetch_offset <= end_offset else (last_fetched_epoch, end_offset)
    epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
    if end_offset < fetch_offset or epoch < last_fetched_epoch:
        return epoch, end_offset
    return None


def truncation_offset(log, leader_epoch: int, leader_end_offset: int) -> Truncation:
    """Where the follower truncates given the leader's end offset for (its floor of) an epoch."""
    local_end = log.log_end_offset
    if leader_end_offset == UNDEFINED:
        # The leader knows nothing of that epoch: keep only what is known committed.
        return Truncation(min(log.high_watermark, local_end), True)
    epoch, end_offset = log.end_offset_for_epoch(leader_epoch)
    if epoch == UNDEFINED:
        # No epoch at or below the leader's here: cut at the leader's end for it.
        return Truncation(min(leader_end_offset, local_end), True)
    if epoch != leader_epoch:
        # We never had the leader's epoch: cut where our floor of it ends, then ask again.
        return Truncation(min(end_offset, local_end), False)
    return Truncation(min(end_offset, leader_end_offset, local_end), True)
