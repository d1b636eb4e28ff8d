"""Deterministic simulation of the whole control plane: seeds pass, broken decisions are caught,
seeds replay exactly. (10,000 seeds: `python -m broker.controller.simulate_cluster --seeds 10000`.)"""

import subprocess
import sys

import pytest

from broker.controller import records as r
from broker.controller.alter_partition import _valid_isr
from broker.controller.election import PartitionChange
from broker.controller.errors import ErrorCode
from broker.controller.simcluster_nodes import Decider
from broker.controller.simulate_cluster import check_seed, run_seed

CI_SEEDS = 500


def test_many_seeds_hold_every_invariant():
    failures = {seed: err for seed in range(CI_SEEDS) if (err := check_seed(seed)) is not None}
    assert not failures


def test_a_seed_replays_exactly_and_exercises_the_control_plane():
    a, b = run_seed(7), run_seed(7)
    assert (a.steps, a.book.committed, a.stats) == (b.steps, b.book.committed, b.stats)
    assert run_seed(8).book.committed != a.book.committed
    totals = {}
    for seed in range(40):
        for key, value in run_seed(seed).stats.items():
            totals[key] = totals.get(key, 0) + value
    for key in ("crashes", "shutdowns", "fences", "unfences", "leader_changes", "offline", "unclean",
                "isr_changes", "alter_isr_ok", "snapshots"):
        assert totals[key] > 0, key


class ElectsOutsideTheIsr(PartitionChange):
    def _valid_leader(self, broker):
        return self.acceptable(broker)


class KeepsAFencedLeader(PartitionChange):
    def _valid_leader(self, broker):
        return broker == self.partition.leader or super()._valid_leader(broker)


class ForgetsTheLeaderEpoch(PartitionChange):
    """Rewrites the partition with a new leader but the old leader epoch."""

    def build(self):
        record = super().build()
        if record is None or record.leader == -2:
            return record
        part = self.partition
        return r.PartitionRecord(
            partition_id=part.partition_id, topic_id=self.topic_id, replicas=list(part.replicas),
            isr=record.isr if record.isr is not None else list(part.isr), leader=record.leader,
            leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch + 1)


def trusts_any_isr(image, broker_id, part, proposal, version):
    """No epoch, leader or eligibility checks: stale leaders' proposals get through."""
    isr = [b for b, _ in proposal.new_isr]
    return ErrorCode.NONE if isr and _valid_isr(part.replicas, isr) else ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("decider", [
    Decider(change_class=ElectsOutsideTheIsr), Decider(change_class=KeepsAFencedLeader),
    Decider(change_class=ForgetsTheLeaderEpoch), Decider(validator=trusts_any_isr),
], ids=["elects-outside-isr", "keeps-fenced-leader", "forgets-leader-epoch", "trusts-any-isr"])
def test_broken_controllers_are_caught(decider):
    assert any(check_seed(seed, decider=decider) for seed in range(100))


def test_cli_reports_count_and_replays():
    out = subprocess.run([sys.executable, "-m", "broker.controller.simulate_cluster", "--seeds", "3",
                          "--start", "50"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "3/3 seeds passed" in out.stdout
    out = subprocess.run([sys.executable, "-m", "broker.controller.simulate_cluster", "--seed", "50"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("seed 50 ok")
