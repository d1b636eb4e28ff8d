"""Partition leadership on the active controller: ElectLeaders, AlterPartition, automatic rebalance.

The decisions are `election`'s and `alter_partition`'s pure functions; this mixin runs them under the
controller's lock on the latest committed image and commits their records.
"""

from __future__ import annotations

import logging
from typing import Sequence

import trio

from . import election
from .alter_partition import IsrProposal, IsrResult, alter_partition
from .errors import ApiError, ErrorCode
from .specs import MAX_RECORDS_PER_USER_OP, BatchTooLarge

log = logging.getLogger(__name__)


class LeadershipOps:
    """Mixed into Controller: needs self._image, self._settings, self._lock, self._commit,
    self._require_leader, self._quorum and self.node_id."""

    async def elect_leaders(self, election_type: int,
                            topic_partitions: Sequence[tuple[str, Sequence[int]]] | None):
        """ElectLeaders (election_type 0 PREFERRED, 1 UNCLEAN) for [(topic, [partition ids])] or None
        (every partition). Returns [(topic, [(partition, error code, error message)])] as Kafka answers:
        ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
        UNKNOWN_TOPIC_OR_PARTITION; with None, partitions needing no election are left out."""
        if election_type not in (election.PREFERRED_ELECTION, election.UNCLEAN_ELECTION):
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}")
        await self._require_leader()
        async with self._lock:
            records, results = election.elect_leaders(self._image, election_type, topic_partitions)
            if len(records) > MAX_RECORDS_PER_USER_OP:
                raise BatchTooLarge()
            await self._commit(records)
            return results

    async def alter_partition(self, broker_id: int, broker_epoch: int, proposals: Sequence[IsrProposal],
                              version: int = 3) -> list[IsrResult]:
        """AlterPartition from a partition leader: one IsrResult per proposal, in order (see
        `alter_partition`); a stale sender epoch raises ApiError(STALE_BROKER_EPOCH)."""
        await self._require_leader()
        async with self._lock:
            records, results = alter_partition(
                self._image, broker_id, broker_epoch, proposals, version,
                unclean_default=self._settings.unclean_leader_election_enable, node_id=self.node_id)
            await self._commit(records)
            return results

    def leader_imbalance(self) -> dict[int, float]:
        """Per preferred leader, the share of its partitions led by another replica."""
        return election.imbalance_by_broker(self._image)

    async def balance_leaders_once(self) -> int:
        """One pass of auto.leader.rebalance: preferred elections where a broker's imbalance is over
        leader.imbalance.per.broker.percentage, plus unclean elections where a topic now allows them.
        Returns how many partitions changed."""
        async with self._lock:
            unclean = election.elect_unclean_where_enabled(
                self._image, self._settings.unclean_leader_election_enable, self.node_id)
            image = self._image.apply(unclean) if unclean else self._image
            records = unclean
            if self._settings.auto_leader_rebalance_enable:
                records = records + election.rebalance(
                    image, self._settings.leader_imbalance_per_broker_percentage)
            await self._commit(records)
            return len(records)

    async def _balance_leaders(self) -> None:
        while True:
            await trio.sleep(self._settings.leader_imbalance_check_interval_s)
            if not self._quorum.is_leader:
                continue
            try:
                changed = await self.balance_leaders_once()
            except ApiError:
                continue                 # lost leadership meanwhile
            if changed:
                log.info("leader balance: moved %d partition leader(s)", changed)
