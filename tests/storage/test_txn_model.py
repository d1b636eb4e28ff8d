"""Transactions against a model: open transactions, the last stable offset and the
aborted-transaction index stay right through rolls and clean or unclean restarts."""

import shutil
import tempfile

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from protocol import records as r
from storage.config import LogConfig
from storage.log import AppendOrigin, Log

from .conftest import NOW

CONFIG = LogConfig.from_mapping({"segment.bytes": 1000, "index.interval.bytes": 100})
PIDS = [11, 12, 13]


class TxnModel(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.dir = tempfile.mkdtemp(prefix="txn-")
        self.path = f"{self.dir}/tx-0"
        self.log = Log(self.path, CONFIG, clock=lambda: NOW)
        self.open: dict[int, int] = {}       # pid -> first offset of its open transaction
        self.seq = {pid: 0 for pid in PIDS}
        self.aborted: list[tuple[int, int, int]] = []  # (pid, first, marker offset)

    def teardown(self):
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _hw(self):
        self.log.set_high_watermark(self.log.log_end_offset)

    @rule(pid=st.sampled_from(PIDS), n=st.integers(1, 4))
    def write_in_transaction(self, pid, n):
        recs = [r.SimpleRecord(value=b"x" * 30, timestamp=NOW)] * n
        res = self.log.append(r.build_batch(recs, producer_id=pid, producer_epoch=0,
                                            base_sequence=self.seq[pid], transactional=True))
        self.seq[pid] += n
        self.open.setdefault(pid, res.first_offset)
        self._hw()

    @rule(n=st.integers(1, 3))
    def write_plain(self, n):
        self.log.append(r.build_batch([r.SimpleRecord(value=b"p", timestamp=NOW)] * n))
        self._hw()

    @rule(pid=st.sampled_from(PIDS), commit=st.booleans())
    def end_transaction(self, pid, commit):
        kind = r.ControlType.COMMIT if commit else r.ControlType.ABORT
        res = self.log.append(r.build_control_batch(kind, pid, 0, 0, timestamp=NOW),
                              origin=AppendOrigin.COORDINATOR)
        first = self.open.pop(pid, None)
        if first is not None and not commit:
            self.aborted.append((pid, first, res.first_offset))
        self._hw()

    @rule()
    def roll(self):
        self.log.roll()

    @rule(clean=st.booleans())
    def reopen(self, clean):
        if clean:
            self.log.close_clean()
        self.log.close()
        self.log = Log(self.path, CONFIG, clock=lambda: NOW, clean_shutdown=clean,
                       high_watermark=10**9)

    @invariant()
    def lso_and_aborted_index(self):
        if not hasattr(self, "log"):
            return
        end = self.log.log_end_offset
        assert self.log.high_watermark == end
        expected_lso = min(self.open.values()) if self.open else end
        assert self.log.last_stable_offset == expected_lso
        got = [(t.producer_id, t.first_offset, t.last_offset) for t in self.log.aborted_transactions(0, end)]
        assert sorted(got) == sorted(self.aborted)
        # a range query returns exactly the overlapping ones
        if end > 2:
            lo, hi = end // 3, 2 * end // 3
            got = {(t.producer_id, t.first_offset, t.last_offset) for t in self.log.aborted_transactions(lo, hi)}
            assert got == {a for a in self.aborted if a[2] >= lo and a[1] < hi}


TxnModel.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
TestTxnModel = TxnModel.TestCase
