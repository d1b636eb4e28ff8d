"""Partition reassignment on the active controller: AlterPartitionReassignments,
ListPartitionReassignments, and completing reassignments once their new replicas are in sync.

The decisions are ``reassignment``'s pure functions; this mixin runs them under the controller's lock
on the latest committed image and commits their records. It sits before ``LeadershipOps`` so that an
AlterPartition (an ISR change) is followed by the completions it allows.
"""

from __future__ import annotations

from typing import Sequence

from . import reassignment
from .errors import ApiError, ErrorCode
from .specs import MAX_RECORDS_PER_USER_OP, BatchTooLarge


class ReassignmentOps:
    """Mixed into Controller: needs self._image, self._lock, self._commit, self._require_leader."""

    async def alter_partition_reassignments(
            self, topics: Sequence[tuple[str, Sequence[tuple[int, Sequence[int] | None]]]]):
        """[(topic, [(partition, target replicas or None to cancel)])] ->
        [(topic, [(partition, error code, error message)])]."""
        await self._require_leader()
        async with self._lock:
            image = self._image
            records, results, touched = [], [], set()
            for name, partitions in topics:
                answers = []
                for pid, target in partitions:
                    try:
                        record = reassignment.alter(image, name, pid, target)
                    except ApiError as exc:
                        answers.append((pid, int(exc.code), exc.message))
                        continue
                    if record is not None:
                        records.append(record)
                        image = image.apply([record])
                        touched.add((name, pid))
                    answers.append((pid, ErrorCode.NONE, None))
                results.append((name, answers))
            # A reassignment whose new replicas are already in sync (or that only removes) is done at once.
            records += reassignment.completions(image, touched)
            if len(records) > MAX_RECORDS_PER_USER_OP:
                raise BatchTooLarge()
            await self._commit(records)
            return results

    async def list_partition_reassignments(self, topics=None):
        """[(topic, [partitions])] or None (all) -> [(topic, [(partition, replicas, adding, removing)])]."""
        await self._require_leader()
        return reassignment.ongoing(self._image, topics)

    async def alter_partition(self, broker_id, broker_epoch, proposals, version: int = 3):
        results = await super().alter_partition(broker_id, broker_epoch, proposals, version)
        if any(result.error_code == 0 for result in results):
            await self._complete_reassignments()
        return results

    async def _complete_reassignments(self) -> None:
        async with self._lock:
            records = reassignment.completions(self._image)
            if records:
                await self._commit(records)
