"""The replication simulation: many seeds pass, deliberately broken replication is caught, seeds replay."""

import subprocess
import sys

import pytest

from broker.replication.leader import LeaderState
from broker.replication.simulate import check_seed, run_seed

CI_SEEDS = 500


def test_many_seeds_hold_every_invariant():
    failures = {seed: err for seed in range(CI_SEEDS) if (err := check_seed(seed)) is not None}
    assert not failures


def test_seeds_exercise_failover_and_truncation():
    outcomes = [run_seed(seed) for seed in range(30)]
    assert sum(o.leaders > 1 for o in outcomes) >= 10
    assert sum(o.truncations for o in outcomes) >= 5
    assert all(o.acknowledged > 0 for o in outcomes)


def test_a_seed_replays_exactly():
    a, b = run_seed(17), run_seed(17)
    assert (a.acknowledged, a.leaders, a.truncations, a.final_log) == \
        (b.acknowledged, b.leaders, b.truncations, b.final_log)
    assert run_seed(18).final_log != a.final_log


class HighWatermarkIsLeaderEnd(LeaderState):
    """acks=all answered as acks=1: the followers are not waited for."""

    def advance_high_watermark(self, leader_log_end):
        moved = leader_log_end > self.high_watermark
        self.high_watermark = max(self.high_watermark, leader_log_end)
        return moved


class CountsProposedIsr(LeaderState):
    """Advances the high watermark over a shrunken ISR before the controller committed it."""

    @property
    def maximal_isr(self):
        return self.pending.new_isr if self.pending is not None else self.isr


class AdmitsLaggingReplicas(LeaderState):
    """Proposes a replica into the ISR before it caught up with the high watermark."""

    def caught_up(self, eligible=None):
        return [r for r, p in sorted(self.followers.items()) if r not in self.isr and p.log_end_offset >= 0]


def never_diverges(log, fetch_offset, last_fetched_epoch):
    """A leader that never tells a follower to truncate its divergent suffix."""
    return None


@pytest.mark.parametrize("leader_class, diverging", [
    (HighWatermarkIsLeaderEnd, None), (CountsProposedIsr, None), (AdmitsLaggingReplicas, None),
    (LeaderState, never_diverges)])
def test_broken_replication_is_caught(leader_class, diverging):
    kwargs = {"diverging": diverging} if diverging else {}
    assert any(check_seed(seed, leader_class, **kwargs) for seed in range(300))


def test_cli_reports_count_and_replays():
    run = subprocess.run([sys.executable, "-m", "broker.replication.simulate", "--seeds", "5"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "5/5 seeds passed" in run.stdout
    one = subprocess.run([sys.executable, "-m", "broker.replication.simulate", "--seed", "3", "-v"],
                         capture_output=True, text=True, timeout=120)
    assert one.returncode == 0 and "seed 3: ok" in one.stdout and "controller:" in one.stdout
