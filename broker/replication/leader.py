"""What a partition leader knows about its followers: their log end offsets, when each was last
caught up, the high watermark that follows from them, and which ISR change to propose.

Sans-IO (time passed in, no logs or sockets): the broker's replica manager and the replication
simulation drive the same object.

As Kafka's Partition:
- a follower's fetch at offset ``o`` says its log ends at ``o``; it is caught up as of that fetch
  when ``o`` reached the leader's log end as of its previous fetch (so a steady stream of appends
  never makes a fetching follower look lagging);
- the high watermark is the smallest log end offset over the *maximal* ISR — the committed ISR plus
  a pending expansion, never less a pending shrink — so it only counts on a smaller ISR once the
  controller has committed it, and it never goes back within a leader epoch;
- a member not caught up for ``replica.lag.time.max.ms`` is proposed out of the ISR; a replica whose
  log reached both the high watermark and the start of this leader epoch is proposed in. One
  proposal at a time: the next waits for the controller's answer (AlterPartition, KIP-497).

Unlike Kafka, that lag counts only time the leader was running: a leader stopped (SIGSTOP, a stalled
host, a frozen event loop) could not hear its followers meanwhile, so the time it was away is
credited to them (``credit_absence``). Without it a leader waking from a pause longer than
replica.lag.time.max.ms proposed its healthy followers out of the ISR before reading their queued
fetches, and every acks=all append then in flight was answered NOT_ENOUGH_REPLICAS_AFTER_APPEND.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol import ErrorCode


@dataclass
class FollowerProgress:
    replica_id: int
    log_end_offset: int = -1          # unknown until its first fetch in this epoch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = -1
    last_fetch_leader_log_end: int = -1
    broker_epoch: int = -1
    log_start_offset: int = -1        # as its last fetch said (DeleteRecords waits for it)


@dataclass(frozen=True)
class IsrProposal:
    """An AlterPartition to send: the new ISR, based on the partition epoch it changes."""
    new_isr: tuple
    leader_epoch: int
    partition_epoch: int


class LeaderState:
    def __init__(self, node_id: int, leader_epoch: int, partition_epoch: int, replicas, isr,
                 *, epoch_start_offset: int, high_watermark: int, now_ms: int):
        self.node_id = node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark
        self.pending: IsrProposal | None = None
        # Followers start "caught up now" (as Kafka on becoming leader): none is thrown out of the
        # ISR before it had replica.lag.time.max.ms to fetch from the new leader.
        self.followers = {r: FollowerProgress(r, last_caught_up_ms=now_ms)
                          for r in self.replicas if r != node_id}

    # ----------------------------------------------------------------------------- image updates
    def update_assignment(self, partition_epoch: int, replicas, isr, now_ms: int) -> None:
        """The controller committed a change in this leader epoch (ISR, reassignment); a pending
        proposal based on an older partition epoch is answered by it (or can no longer commit)."""
        if partition_epoch <= self.partition_epoch and self.pending is not None:
            return   # older than what an AlterPartition answer already told us
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.pending = None
        for r in self.replicas:
            if r != self.node_id and r not in self.followers:
                self.followers[r] = FollowerProgress(r, last_caught_up_ms=now_ms)
        for r in list(self.followers):
            if r not in self.replicas:
                del self.followers[r]

    @property
    def maximal_isr(self) -> tuple:
        if self.pending is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending.new_isr)))

    # ------------------------------------------------------------------------------ follower fetches
    def on_follower_fetch(self, replica_id: int, fetch_offset: int, leader_log_end: int,
                          now_ms: int, broker_epoch: int = -1,
                          log_start_offset: int = -1) -> FollowerProgress | None:
        """Record a follower's fetch; None when `replica_id` is not a replica of this partition."""
        progress = self.followers.get(replica_id)
        if progress is None:
            return None
        if fetch_offset >= leader_log_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now_ms)
        elif fetch_offset >= progress.last_fetch_leader_log_end >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        progress.last_fetch_leader_log_end = leader_log_end
        progress.broker_epoch = broker_epoch
        progress.log_start_offset = log_start_offset
        return progress

    def advance_high_watermark(self, leader_log_end: int) -> bool:
        """Recompute the high watermark from the maximal ISR; True if it moved (only ever up)."""
        candidate = leader_log_end
        for r in self.maximal_isr:
            if r == self.node_id:
                continue
            progress = self.followers.get(r)
            candidate = min(candidate, progress.log_end_offset if progress else -1)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    # ------------------------------------------------------------------------------- ISR changes
    def lagging(self, now_ms: int, lag_time_max_ms: int) -> list[int]:
        """ISR members (not the leader) not caught up within replica.lag.time.max.ms."""
        return [r for r in self.isr if r != self.node_id and r in self.followers
                and now_ms - self.followers[r].last_caught_up_ms > lag_time_max_ms]

    def credit_absence(self, absent_ms: int) -> None:
        """The leader was not running for `absent_ms`: its followers' lag clocks skip that span."""
        if absent_ms > 0:
            for progress in self.followers.values():
                progress.last_caught_up_ms += absent_ms

    def caught_up(self, eligible=None) -> list[int]:
        """Replicas outside the ISR whose log reached the high watermark and this epoch's start;
        with `eligible(replica, broker epoch of its last fetch)`, only those it allows."""
        return [r for r, p in sorted(self.followers.items())
                if r not in self.isr and p.log_end_offset >= 0
                and p.log_end_offset >= self.high_watermark
                and p.log_end_offset >= self.epoch_start_offset
                and (eligible is None or eligible(r, p.broker_epoch))]

    def propose(self, now_ms: int, lag_time_max_ms: int, eligible=None) -> IsrProposal | None:
        """The next ISR change to send to the controller, if any and none is in flight.
        `eligible` (see `caught_up`) keeps out of an expansion the replicas the controller would
        refuse: a pending expansion counts in the high watermark until it is answered, so asking
        for one of them holds every acks=all append for the controller's answer (and none comes
        while the quorum elects a new leader)."""
        if self.pending is not None:
            return None
        isr = set(self.isr)
        shrink = self.lagging(now_ms, lag_time_max_ms)
        if shrink:
            isr -= set(shrink)
        else:
            grow = self.caught_up(eligible)
            if not grow:
                return None
            isr |= set(grow)
        self.pending = IsrProposal(tuple(sorted(isr)), self.leader_epoch, self.partition_epoch)
        return self.pending

    def proposal_failed(self, error: int) -> bool:
        """The controller answered `error` (an int ErrorCode); True when the same proposal should
        be sent again.

        As Kafka's Partition: only INELIGIBLE_REPLICA and OPERATION_NOT_ATTEMPTED say for sure the
        change was not applied, so only they fall back to the committed ISR. A stale leader or
        partition epoch means newer metadata is on its way, and the proposal stays pending (the
        high watermark keeps counting its maximal ISR) until it arrives; anything else (no
        controller, a timeout) is retried: its outcome is unknown.
        """
        if error in (ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED):
            self.pending = None
            return False
        if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID):
            return False
        return self.pending is not None

    def proposal_committed(self, partition_epoch: int, isr) -> None:
        """The AlterPartition answer carries the committed state (the image may lag behind it);
        only a state newer than the one the proposal was based on answers it."""
        if partition_epoch > self.partition_epoch:
            self.partition_epoch = partition_epoch
            self.isr = tuple(isr)
            self.pending = None
