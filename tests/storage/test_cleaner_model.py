"""Compaction against a model: whatever the interleaving of appends, rolls, cleaning
passes, time and restarts, a compacted log keeps each key's latest record at its
original offset, never resurrects an older value, and drops tombstones only after
delete.retention.ms."""

import shutil
import tempfile

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from protocol import records as r
from storage.config import LogConfig
from storage.log import Log

from .conftest import NOW

CONFIG = LogConfig.from_mapping({"cleanup.policy": "compact", "segment.bytes": 1200,
                                 "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": 1000,
                                 "file.delete.delay.ms": 0, "index.interval.bytes": 100})
KEYS = [b"a", b"b", b"c", b"d", b"e", b"f"]


class Clock:
    def __init__(self):
        self.now = NOW

    def __call__(self):
        return self.now


class CompactionModel(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.dir = tempfile.mkdtemp(prefix="compact-")
        self.path = f"{self.dir}/cm-0"
        self.clock = Clock()
        self.log = Log(self.path, CONFIG, clock=self.clock)
        self.latest: dict[bytes, tuple[int, bytes | None, int]] = {}  # key -> (offset, value, append ms)
        self.history: dict[int, tuple[bytes, bytes | None]] = {}  # every offset ever written

    def teardown(self):
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(items=st.lists(st.tuples(st.sampled_from(KEYS), st.none() | st.binary(min_size=1, max_size=60)),
                         min_size=1, max_size=5),
          codec=st.sampled_from([r.Compression.NONE, r.Compression.GZIP, r.Compression.ZSTD]))
    def append(self, items, codec):
        recs = [r.SimpleRecord(value=v, key=k, timestamp=self.clock.now) for k, v in items]
        res = self.log.append(r.build_batch(recs, compression_type=codec))
        for i, (k, v) in enumerate(items):
            self.latest[k] = (res.first_offset + i, v, self.clock.now)
            self.history[res.first_offset + i] = (k, v)
        self.log.set_high_watermark(self.log.log_end_offset)

    @rule()
    def roll(self):
        self.log.roll()

    @rule(force=st.booleans())
    def clean(self, force):
        self.log.clean(force=force)

    @rule(ms=st.integers(0, 1500))
    def time_passes(self, ms):
        self.clock.now += ms

    @rule()
    def reopen(self):
        self.log.close_clean()
        self.log.close()
        self.log = Log(self.path, CONFIG, clock=self.clock, high_watermark=10**9)

    @invariant()
    def latest_values_survive_and_nothing_is_resurrected(self):
        if not hasattr(self, "log"):
            return
        seen: dict[bytes, tuple[int, bytes | None]] = {}
        offset, end = self.log.log_start_offset, self.log.log_end_offset
        previous = -1
        while offset < end:
            batches = self.log.read_batches(offset)
            if not batches:
                break
            for b in batches:
                b.ensure_valid()
                if b.is_control:
                    offset = b.last_offset + 1
                    continue
                for rec in b.records():
                    assert rec.offset > previous
                    previous = rec.offset
                    assert self.history[rec.offset] == (rec.key, rec.value)  # offsets kept
                    seen[rec.key] = (rec.offset, rec.value)
                offset = b.last_offset + 1
        for key, (off, value, ms) in self.latest.items():
            if key in seen:
                assert seen[key] == (off, value), "an older value came back or the latest was lost"
            else:
                # only a tombstone may vanish, and only after delete.retention.ms
                assert value is None, f"latest value of {key!r} lost"
                assert self.clock.now - ms >= 1000, "tombstone dropped before delete.retention.ms"


CompactionModel.TestCase.settings = settings(max_examples=20, stateful_step_count=30, deadline=None,
                                             suppress_health_check=[HealthCheck.too_slow])
TestCompactionModel = CompactionModel.TestCase
