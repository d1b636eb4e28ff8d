"""The leader's bookkeeping (high watermark, ISR proposals) and the divergence rules, without I/O."""

from protocol import ErrorCode
from storage.epochs import LeaderEpochCache

from broker.replication.acks import acks_all_outcome
from broker.replication.divergence import diverging_epoch, truncation_offset
from broker.replication.leader import LeaderState

LAG = 1000


def leader(isr=(1, 2, 3), hw=0, start=0, now=0):
    return LeaderState(1, leader_epoch=5, partition_epoch=7, replicas=(1, 2, 3), isr=isr,
                       epoch_start_offset=start, high_watermark=hw, now_ms=now)


def test_high_watermark_is_the_smallest_isr_log_end_and_never_goes_back():
    state = leader()
    state.on_follower_fetch(2, 10, 20, now_ms=1)
    assert not state.advance_high_watermark(20)           # follower 3 unknown yet
    state.on_follower_fetch(3, 15, 20, now_ms=1)
    assert state.advance_high_watermark(20) and state.high_watermark == 10
    state.on_follower_fetch(2, 4, 20, now_ms=2)           # a follower that truncated
    assert not state.advance_high_watermark(20) and state.high_watermark == 10


def test_a_shrink_counts_only_once_committed_and_an_expansion_at_once():
    state = leader()
    state.on_follower_fetch(2, 20, 20, now_ms=0)
    state.on_follower_fetch(3, 5, 20, now_ms=0)
    state.advance_high_watermark(20)
    assert state.high_watermark == 5
    state.on_follower_fetch(2, 20, 20, now_ms=LAG)         # 2 keeps up, 3 does not
    proposal = state.propose(now_ms=LAG + 1, lag_time_max_ms=LAG)
    assert proposal.new_isr == (1, 2) and proposal.partition_epoch == 7
    state.advance_high_watermark(20)
    assert state.high_watermark == 5                      # 3 still counts while pending
    assert state.propose(now_ms=LAG + 2, lag_time_max_ms=LAG) is None   # one at a time
    state.proposal_committed(8, (1, 2))
    assert state.advance_high_watermark(20) and state.high_watermark == 20
    # 3 catches up: proposed back, and counted as soon as proposed
    state.on_follower_fetch(3, 20, 25, now_ms=LAG + 3)
    proposal = state.propose(now_ms=LAG + 3, lag_time_max_ms=LAG)
    assert proposal.new_isr == (1, 2, 3)
    state.on_follower_fetch(2, 25, 25, now_ms=LAG + 3)
    state.advance_high_watermark(25)
    assert state.high_watermark == 20


def test_a_follower_keeping_up_with_a_moving_log_end_is_caught_up():
    state = leader()
    for t in range(0, 10 * LAG, 100):
        # each fetch reaches the log end the previous fetch saw; meanwhile the log grew
        state.on_follower_fetch(2, t, t + 5, now_ms=t)
        state.on_follower_fetch(3, t, t + 5, now_ms=t)
    assert state.lagging(10 * LAG, LAG) == []
    state.on_follower_fetch(3, 10, 10 * LAG + 5, now_ms=10 * LAG)   # fell far behind
    state.on_follower_fetch(2, 10 * LAG + 5, 10 * LAG + 5, now_ms=11 * LAG)
    assert state.lagging(11 * LAG + 1, LAG) == [3]


def test_expansion_needs_the_high_watermark_and_the_epoch_start():
    state = leader(isr=(1, 2), hw=50, start=60)
    state.on_follower_fetch(2, 70, 70, now_ms=0)
    state.on_follower_fetch(3, 55, 70, now_ms=0)
    assert state.caught_up() == []                         # past the HW, not this epoch's start
    state.on_follower_fetch(3, 60, 70, now_ms=0)
    assert state.caught_up() == [3]


def test_answers_to_a_proposal_as_kafka():
    state = leader()
    state.on_follower_fetch(3, 0, 10, now_ms=0)
    state.propose(now_ms=LAG + 1, lag_time_max_ms=LAG)
    assert not state.proposal_failed(ErrorCode.INVALID_UPDATE_VERSION) and state.pending is not None
    assert not state.proposal_failed(ErrorCode.FENCED_LEADER_EPOCH) and state.pending is not None
    assert state.proposal_failed(ErrorCode.REQUEST_TIMED_OUT)            # unknown outcome: resend
    assert not state.proposal_failed(ErrorCode.INELIGIBLE_REPLICA) and state.pending is None
    state.propose(now_ms=LAG + 1, lag_time_max_ms=LAG)
    state.proposal_committed(7, (1, 2))          # not newer than the proposal's base: ignored
    assert state.pending is not None and state.isr == (1, 2, 3)
    state.update_assignment(8, (1, 2, 3), (1, 2), now_ms=LAG + 2)
    assert state.pending is None and state.isr == (1, 2)


def test_acks_all_outcome():
    assert acks_all_outcome(10, 9, 3, 2) is None
    assert acks_all_outcome(10, 10, 3, 2) == ErrorCode.NONE
    assert acks_all_outcome(10, 12, 1, 2) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class _Log:
    def __init__(self, entries, end, hw=0):
        self.epochs = LeaderEpochCache(None)
        self.epochs.entries = list(entries)
        self.log_end_offset, self.high_watermark = end, hw

    def end_offset_for_epoch(self, epoch):
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    @property
    def latest_epoch(self):
        return self.epochs.latest


def test_leader_reports_divergence_only_when_the_follower_went_astray():
    leader_log = _Log([(1, 0), (3, 10)], end=20)
    assert diverging_epoch(leader_log, 15, 3) is None          # a prefix of the leader's
    assert diverging_epoch(leader_log, 25, 3) == (3, 20)        # past our end in our latest epoch
    assert diverging_epoch(leader_log, 10, 1) is None
    assert diverging_epoch(leader_log, 12, 1) == (1, 10)        # epoch 1 ended at 10 here
    assert diverging_epoch(leader_log, 12, 2) == (1, 10)        # epoch 2 unknown here
    assert diverging_epoch(leader_log, 12, -1) is None


def test_follower_truncation_offsets_as_kafka():
    follower = _Log([(1, 0), (2, 10)], end=14, hw=8)
    assert truncation_offset(follower, 1, 10) == (10, True)     # cut where both agree
    assert truncation_offset(follower, 1, 12) == (10, True)     # never past our own end of it
    assert truncation_offset(follower, 0, 5) == (0, True)       # older than all we have: from 0
    gappy = _Log([(1, 0), (3, 10)], end=14)
    assert truncation_offset(gappy, 2, 12) == (10, False)       # we never had epoch 2: ask again
    assert truncation_offset(follower, 4, -1) == (8, True)      # leader knows nothing: keep the HW
