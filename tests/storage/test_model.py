"""Random append/read/roll/retention/truncate/reopen sequences against an in-memory model."""

import dataclasses
import shutil
import tempfile

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from protocol import records as r
from storage.config import LogConfig
from storage.log import Log

from .conftest import NOW

CONFIG = LogConfig.from_mapping({"segment.bytes": 3000, "index.interval.bytes": 200,
                                 "retention.ms": -1, "file.delete.delay.ms": 0})


class LogModel(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.dir = tempfile.mkdtemp(prefix="model-")
        self.path = f"{self.dir}/m-0"
        self.now = NOW
        self.log = Log(self.path, CONFIG, clock=self.clock)
        self.records: dict[int, bytes] = {}  # offset -> value
        self.batches: list[tuple[int, int]] = []  # (base, last) as appended
        self.start_offset = 0
        self.end = 0

    def clock(self):
        return self.now

    def teardown(self):
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(n=st.integers(1, 6), size=st.integers(0, 300),
          codec=st.sampled_from([r.Compression.NONE, r.Compression.LZ4]))
    def append(self, n, size, codec):
        values = [bytes([self.end % 251]) * size + b"%d" % (self.end + i) for i in range(n)]
        data = r.build_batch([r.SimpleRecord(value=v, timestamp=self.now) for v in values], compression_type=codec)
        res = self.log.append(data)
        assert (res.first_offset, res.last_offset) == (self.end, self.end + n - 1)
        for i, v in enumerate(values):
            self.records[self.end + i] = v
        self.batches.append((self.end, self.end + n - 1))
        self.end += n
        self.log.set_high_watermark(self.end)

    @rule()
    def roll(self):
        self.log.roll()

    @precondition(lambda self: self.end > self.start_offset)
    @rule(data=st.data())
    def delete_records(self, data):
        offset = data.draw(st.integers(self.start_offset, self.end))
        assert self.log.delete_records(offset) == offset
        self.start_offset = offset

    @rule(limit=st.integers(0, 6000))
    def retention_by_size(self, limit):
        self.log.update_config(dataclasses.replace(CONFIG, retention_bytes=limit))
        try:
            self.log.apply_retention()
        finally:
            self.log.update_config(CONFIG)
        segments = self.log.segments
        new_start = self.log.log_start_offset
        assert new_start >= self.start_offset
        assert new_start == self.start_offset or new_start == segments[0].base_offset
        # Kafka's rule: whole segments go while what is left stays above the limit
        if new_start > self.start_offset:
            assert self.log.size_bytes >= limit
        self.start_offset = new_start

    @rule(advance=st.integers(0, 3000))
    def retention_by_time(self, advance):
        self.now += advance
        self.log.update_config(dataclasses.replace(CONFIG, retention_ms=1000))
        try:
            self.log.apply_retention()
        finally:
            self.log.update_config(CONFIG)
        new_start = self.log.log_start_offset
        assert new_start >= self.start_offset
        first = self.log.segments[0]
        if new_start > self.start_offset and first.size:
            assert self.now - first.max_timestamp <= 1000 or first is self.log.active_segment
        self.start_offset = new_start

    @rule(extra=st.integers(0, 5))
    def truncate_fully(self, extra):
        offset = self.end + extra
        self.log.truncate_fully_and_start_at(offset)
        self.records.clear()
        self.batches = []
        self.start_offset = self.end = offset
        self.log.set_high_watermark(offset)

    @precondition(lambda self: self.end > self.start_offset)
    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.integers(self.start_offset, self.end))
        self.log.truncate_to(offset)
        if offset >= self.end:
            return
        # A batch straddling the target goes as a whole; if that reaches below the
        # log start, the log restarts empty at the log start.
        cut = min(b for b, last in self.batches if last >= offset)
        expected_end = cut if cut >= self.start_offset else self.start_offset
        assert self.log.log_end_offset == expected_end
        self.batches = [(b, last) for b, last in self.batches if last < offset]
        for o in [o for o in self.records if o >= cut]:
            del self.records[o]
        self.end = expected_end
        self.log.set_high_watermark(self.end)

    @rule()
    def flush(self):
        self.log.flush()

    @rule(data=st.data())
    def crash_losing_the_unflushed_tail(self, data):
        """A power cut: whatever is past the recovery point may be cut anywhere."""
        recovery_point = self.log.recovery_point
        active = self.log.active_segment
        floor = 0
        if recovery_point > active.base_offset:
            found = active.find_batch(recovery_point)
            floor = found[0] if found else active.size
        cut = data.draw(st.integers(floor, active.size))
        path = active.log_path
        self.log.close()
        with open(path, "r+b") as f:
            f.truncate(cut)
        self.log = Log(self.path, CONFIG, clock=self.clock, clean_shutdown=False,
                       recovery_point=recovery_point, log_start_offset=self.start_offset,
                       high_watermark=self.end)
        new_end = self.log.log_end_offset
        assert new_end >= min(recovery_point, self.end), "flushed data was lost"
        assert new_end == self.start_offset or new_end in {last + 1 for _, last in self.batches}
        self.batches = [(b, last) for b, last in self.batches if last < new_end]
        for o in [o for o in self.records if o >= new_end]:
            del self.records[o]
        self.end = new_end
        self.start_offset = min(self.start_offset, new_end)
        self.log.set_high_watermark(self.end)

    @rule(clean=st.booleans())
    def reopen(self, clean):
        if clean:
            self.log.close_clean()
        self.log.close()
        self.log = Log(self.path, CONFIG, clock=self.clock, clean_shutdown=clean,
                       recovery_point=self.log.recovery_point if clean else 0,
                       log_start_offset=self.start_offset, high_watermark=self.end)

    @precondition(lambda self: self.end > self.start_offset)
    @rule(data=st.data(), max_bytes=st.integers(1, 3000))
    def read_somewhere(self, data, max_bytes):
        offset = data.draw(st.integers(self.start_offset, self.end - 1))
        batches = self.log.read_batches(offset, max_bytes)
        assert batches, "a read below the log end returns at least one batch"
        assert batches[0].base_offset <= offset <= batches[0].last_offset
        total = sum(b.size for b in batches)
        assert len(batches) == 1 or total <= max_bytes
        for b in batches:
            b.ensure_valid()
            for rec in b.records():
                assert self.records[rec.offset] == rec.value

    @invariant()
    def offsets_agree(self):
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start_offset

    @invariant()
    def full_scan_matches(self):
        if not hasattr(self, "log"):
            return
        seen, offset = {}, self.start_offset
        while offset < self.end:
            batches = self.log.read_batches(offset)
            assert batches
            for b in batches:
                for rec in b.records():
                    if rec.offset >= self.start_offset:
                        seen[rec.offset] = rec.value
                offset = b.last_offset + 1
        assert seen == {o: v for o, v in self.records.items() if o >= self.start_offset}


LogModel.TestCase.settings = settings(max_examples=25, stateful_step_count=25, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
TestLogModel = LogModel.TestCase
