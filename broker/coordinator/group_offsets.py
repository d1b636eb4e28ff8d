"""Committed offsets of the classic group coordinator: commits (plain and transactional), fetches,
deletions, retention (KIP-211) and the offsets of deleted topics. A commit is visible (to OffsetFetch,
retention, the group's own answers) only once its write has committed; until then it is pending.

`OffsetsMixin` is part of `GroupCoordinator` (which supplies `groups`, `log`, `clock`, `config`,
`timers`, `_next_offset_write`, `_new_group`, `_validate_member` and `_tombstone_group`); kept apart so
each module has one job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from protocol import ErrorCode

from .group import Group, GroupState, OffsetAndMetadata
from .log_records import OffsetCommitRecord

E = ErrorCode
S = GroupState

@dataclass
class OffsetCommitItem:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: Optional[str] = ""
    expire_timestamp: int = -1


@dataclass
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = E.NONE


class OffsetsMixin:
    # ==== offsets =====================================================================================
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: Optional[str],
                       generation_id: int, items: list[OffsetCommitItem], *, producer_id: int = -1,
                       producer_epoch: int = -1) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetCommit, or TxnOffsetCommit when a producer id is given (offsets stay pending until the
        transaction's commit marker). Answers (error for every partition, per-partition errors)."""
        transactional = producer_id >= 0
        # Kafka keeps accepting plain commits for the empty group id (old consumers); not in transactions
        if group_id is None or (transactional and not group_id):
            return E.INVALID_GROUP_ID, {}
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0 and not transactional:
                return E.ILLEGAL_GENERATION, {}
            group = self._new_group(group_id)  # a simple (assign()-style) group, or a txn's offsets
        error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id, transactional)
        if error is not E.NONE:
            if not group.members and not group.has_offsets() and group.generation_id == 0:
                self.groups.pop(group_id, None)
            return error, {}
        now = self.clock.now_ms()
        errors: dict[tuple[str, int], ErrorCode] = {}
        records, accepted = [], {}
        for item in items:
            key = (item.topic, item.partition)
            metadata = item.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors[key] = E.OFFSET_METADATA_TOO_LARGE
                continue
            value = OffsetAndMetadata(item.offset, item.leader_epoch, metadata, now, item.expire_timestamp)
            records.append(OffsetCommitRecord(group_id, item.topic, item.partition, value))
            accepted[key] = value
            errors[key] = E.NONE
        if not records:
            return E.NONE, errors
        try:
            written = self.log.append(group_id, records, producer_id=producer_id, producer_epoch=producer_epoch)
        except Exception as exc:
            error = append_error(exc, offsets=True)
            return E.NONE, {key: (error if err is E.NONE else err) for key, err in errors.items()}
        # Nothing becomes visible before the write commits (Kafka's pending offset commits): a
        # coordinator elected after a failed or unreplicated write never had it, so showing it here
        # could make committed offsets go backwards when the coordinator moves.
        if transactional:
            group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
            written.add_callback(lambda code: self._txn_offsets_written(group, producer_id, accepted, code))
        else:
            self._next_offset_write += 1
            write = self._next_offset_write
            for key, value in accepted.items():
                group.pending_offsets.setdefault(key, {})[write] = value
            written.add_callback(lambda code: self._offsets_written(group, write, accepted, code))
        return E.NONE, errors

    @staticmethod
    def _offsets_written(group: Group, write: int, accepted: dict, code: ErrorCode) -> None:
        """A plain commit's write committed (`code` NONE: its offsets become visible) or failed
        (they are dropped; the client got the error and retries)."""
        for key, value in accepted.items():
            staged = group.pending_offsets.get(key)
            if staged is None or staged.pop(write, None) is None:
                continue   # its offsets were deleted meanwhile, or a later commit already won
            if code is E.NONE:
                group.offsets[key] = value
                # older writes sit before this one in the log: committed too, and superseded
                for older in [w for w in staged if w < write]:
                    del staged[older]
            if not staged:
                del group.pending_offsets[key]

    @staticmethod
    def _txn_offsets_written(group: Group, producer_id: int, accepted: dict, code: ErrorCode) -> None:
        """A TxnOffsetCommit's write failed: its offsets leave the transaction (they stay pending
        until the marker when it committed)."""
        if code is E.NONE:
            return
        pending = group.pending_txn_offsets.get(producer_id)
        if pending is None:
            return   # the transaction already ended
        for key, value in accepted.items():
            if pending.get(key) is value:
                del pending[key]
        if not pending:
            del group.pending_txn_offsets[producer_id]

    def _validate_offset_commit(self, group: Group, member_id: str, instance_id: Optional[str],
                                generation_id: int, transactional: bool) -> ErrorCode:
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state is S.EMPTY:
            return E.NONE  # admin or assign()-style commit: allowed while nobody manages the group
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error is not E.NONE:
                return error
            if generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
        elif not transactional and group.state is not S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and group.state is S.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def complete_transaction(self, group_id: str, producer_id: int, commit: bool) -> None:
        """The commit or abort marker for `producer_id` reached the group's offsets partition."""
        group = self.groups.get(group_id)
        if group is None:
            return
        pending = group.pending_txn_offsets.pop(producer_id, None)
        if pending and commit:
            for key, value in pending.items():
                current = group.offsets.get(key)
                # a later plain commit wins over a transaction that started before it
                if current is None or current.commit_timestamp <= value.commit_timestamp:
                    group.offsets[key] = value

    def groups_with_pending_offsets(self, producer_id: int) -> list[str]:
        return [g.group_id for g in self.groups.values() if producer_id in g.pending_txn_offsets]

    def fetch_offsets(self, group_id: str, partitions: Optional[list[tuple[str, int]]],
                      require_stable: bool = False) -> tuple[ErrorCode, list[FetchedOffset]]:
        """OffsetFetch for one group; `partitions=None` means every offset the group has."""
        if group_id is None:  # the empty group id is valid here, as in Kafka
            return E.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            if partitions is None:
                return E.NONE, []
            return E.NONE, [FetchedOffset(t, p) for t, p in partitions]
        wanted = sorted(group.offsets) if partitions is None else partitions
        out = []
        for topic, partition in wanted:
            if require_stable and group.has_pending_offsets(topic, partition):
                out.append(FetchedOffset(topic, partition, error=E.UNSTABLE_OFFSET_COMMIT))
                continue
            om = group.offsets.get((topic, partition))
            if om is None:
                out.append(FetchedOffset(topic, partition))
            else:
                out.append(FetchedOffset(topic, partition, om.offset, om.leader_epoch, om.metadata))
        return E.NONE, out

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                       ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetDelete: offsets of topics the live members subscribe to cannot go."""
        group = self.groups.get(group_id)
        if not group_id:
            return E.INVALID_GROUP_ID, {}
        if group is None or group.state is S.DEAD:
            return E.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if group.state is not S.EMPTY:
            topics = group.subscribed_topics()
            if topics is None:
                return E.NON_EMPTY_GROUP, {}
            subscribed = topics
        errors, records = {}, []
        for topic, partition in partitions:
            if topic in subscribed:
                errors[(topic, partition)] = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                errors[(topic, partition)] = E.NONE
                if (topic, partition) in group.offsets or (topic, partition) in group.pending_offsets:
                    records.append(OffsetCommitRecord(group_id, topic, partition, None))
        if records:
            try:
                self.log.append(group_id, records)
            except Exception as exc:
                return append_error(exc), {}
            for record in records:
                group.offsets.pop((record.topic, record.partition), None)
                group.pending_offsets.pop((record.topic, record.partition), None)
        return E.NONE, errors

    def forget_topics(self, topics: set[str]) -> None:
        """Deleted topics take their committed offsets with them (Kafka's onPartitionsDeleted)."""
        for group in list(self.groups.values()):
            gone = [key for key in group.offset_keys() if key[0] in topics]
            if not gone:
                continue
            try:
                self.log.append(group.group_id, [OffsetCommitRecord(group.group_id, t, p, None) for t, p in gone])
            except Exception:
                continue  # the offsets stay; the next deletion or expiry tries again
            for key in gone:
                group.offsets.pop(key, None)
                group.pending_offsets.pop(key, None)
            if group.state is S.EMPTY and not group.has_offsets():
                try:
                    self._tombstone_group(group, [])
                except Exception:
                    pass
    # ==== offsets retention ===========================================================================
    def _schedule_offset_expiry(self) -> None:
        self.timers.schedule(("offsets-expiry",),
                             self.clock.now_ms() + self.config.offsets_retention_check_interval_ms,
                             self._expire_offsets)

    def _expire_offsets(self) -> None:
        now = self.clock.now_ms()
        consumer_groups = getattr(self, "consumer_groups", None)
        for group in list(self.groups.values()):
            if consumer_groups is not None and consumer_groups.is_active(group.group_id):
                continue  # a KIP-848 group with members keeps the offsets stored here
            expired = group.expired_offsets(now, self.config.offsets_retention_ms)
            try:
                if group.state is S.EMPTY and len(expired) == len(group.offsets) \
                        and not (group.pending_offsets or group.pending_txn_offsets):
                    self._tombstone_group(group, expired)  # nothing left: the group is gone
                elif expired:
                    self.log.append(group.group_id,
                                    [OffsetCommitRecord(group.group_id, t, p, None) for t, p in expired])
                    for key in expired:
                        group.offsets.pop(key, None)
            except Exception:
                continue  # try again next round
        if consumer_groups is not None:
            consumer_groups.delete_forgotten(has_offsets=lambda group_id: group_id in self.groups)
        self._schedule_offset_expiry()

def append_error(exc: Exception | ErrorCode, *, offsets: bool = False, group_metadata: bool = False) -> ErrorCode:
    """The error a client gets when writing to `__consumer_offsets` failed (Kafka's mapping), from
    the append's exception or the error its acknowledgement reported. `offsets`: an OffsetCommit's
    write; `group_metadata`: a SyncGroup leader's (a timed-out one means "rebalance again")."""
    code = exc if isinstance(exc, ErrorCode) else getattr(exc, "code", None)
    if code is None:
        code = getattr(exc, "error_code", None)
    try:
        code = ErrorCode(code)
    except (TypeError, ValueError):
        return E.COORDINATOR_NOT_AVAILABLE
    if code is E.REQUEST_TIMED_OUT and group_metadata:
        return E.REBALANCE_IN_PROGRESS
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE if offsets else E.UNKNOWN_SERVER_ERROR
    return code
