"""Deterministic simulation of the Raft core: many seeds pass, broken cores are caught, seeds replay."""

import subprocess
import sys

import pytest

from broker.controller.raft.core import RaftNode
from broker.controller.simulate import check_seed, run_seed

CI_SEEDS = 500


def test_many_seeds_hold_every_invariant():
    failures = {seed: err for seed in range(CI_SEEDS) if (err := check_seed(seed)) is not None}
    assert not failures


def test_a_seed_replays_exactly():
    a, b = run_seed(17), run_seed(17)
    assert (a.steps, a.committed, a.leaders, a.stats) == (b.steps, b.committed, b.leaders, b.stats)
    assert run_seed(18).committed != a.committed


class VotesForStaleLogs(RaftNode):
    def _log_up_to_date(self, last_epoch, end_offset):
        return True


class CommitsWithoutMajority(RaftNode):
    def _leader_update_hw(self, now):
        self._commit_to(self.end_offset)


class SkipsConsistencyCheck(RaftNode):
    def _end_offset_for_epoch(self, epoch):
        found = super()._end_offset_for_epoch(epoch)
        return (epoch, 10**9) if self.is_leader else found


class ForgetsVotes(RaftNode):
    """Grants votes without making them durable: after a crash it may vote twice in one epoch."""

    def _on_vote(self, src, req, now):
        super()._on_vote(src, req, now)
        self._out = [e for e in self._out if type(e).__name__ != "PersistState"]


class NeverPersistsState(RaftNode):
    def _persist(self):
        pass


@pytest.mark.parametrize("broken", [VotesForStaleLogs, CommitsWithoutMajority, SkipsConsistencyCheck,
                                    ForgetsVotes, NeverPersistsState])
def test_broken_cores_are_caught(broken):
    assert any(check_seed(seed, node_class=broken) for seed in range(300))


def test_cli_reports_count_and_replays():
    out = subprocess.run([sys.executable, "-m", "broker.controller.simulate", "--seeds", "5", "--start", "100"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "5/5 seeds passed" in out.stdout
    out = subprocess.run([sys.executable, "-m", "broker.controller.simulate", "--seed", "100"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("seed 100 ok")
