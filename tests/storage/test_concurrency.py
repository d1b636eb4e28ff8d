"""Appends, reads, housekeeping and compaction from several threads at once, with an
LRU small enough that descriptors are evicted under the readers' feet."""

import random
import threading

from protocol import records as r
from storage.manager import LogManager

from .conftest import NOW


def test_threads_share_a_manager_safely(tmp_path, clock):
    mgr = LogManager(str(tmp_path), {"segment.bytes": 4000, "index.interval.bytes": 256,
                                     "file.delete.delay.ms": 0}, max_open_files=4, clock=clock)
    parts = 6
    logs = [mgr.get_or_create_log("c", p, {"cleanup.policy": "compact,delete",
                                          "min.cleanable.dirty.ratio": 0.1} if p == 0 else None)
            for p in range(parts)]
    errors = []
    stop = threading.Event()

    def writer(p):
        try:
            rng = random.Random(p)
            for i in range(200):
                recs = [r.SimpleRecord(value=b"%d-%d" % (p, i) * rng.randint(1, 20), key=b"k%d" % (i % 7),
                                       timestamp=NOW + i)]
                res = logs[p].append(r.build_batch(recs))
                logs[p].set_high_watermark(res.last_offset + 1)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    def reader(seed):
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                log = logs[rng.randrange(parts)]
                end = log.high_watermark
                start = log.log_start_offset
                if end <= start:
                    continue
                offset = rng.randrange(start, end)
                for piece in log.read(offset, rng.randint(1, 3000), max_offset=end):
                    for b in r.iter_batches(piece.read()):
                        b.ensure_valid()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    def housekeeping():
        try:
            while not stop.is_set():
                mgr.tick()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(p,)) for p in range(parts)]
    others = [threading.Thread(target=reader, args=(s,)) for s in range(2)]
    others.append(threading.Thread(target=housekeeping))
    for t in writers + others:
        t.start()
    for t in writers:
        t.join(60)
    stop.set()
    for t in others:
        t.join(60)
    assert not errors, errors
    for p, log in enumerate(logs):
        assert log.log_end_offset == 200
        seen, offset = {}, log.log_start_offset
        while offset < log.log_end_offset:
            batches = log.read_batches(offset)
            assert batches
            for b in batches:
                for rec in b.records():
                    seen[rec.key] = rec.value
                offset = b.last_offset + 1
        # the latest value of every key survives, compacted or not
        assert all(seen[b"k%d" % k].startswith(b"%d-%d" % (p, 199 - (199 - k) % 7)) for k in range(7))
    mgr.close()
