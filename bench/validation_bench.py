"""What append validation costs per record: `python -m bench.validation_bench [--seconds S] [--rounds N]`.

For batches of 100 B and 1 KiB records, uncompressed and in each codec, it times
`storage.validation.validate_append` as a client Produce runs it (header, CRC and the per-record walk:
count, lengths, offset deltas, timestamps, decompression) against the same call with the walk left out
(header and CRC only: what the broker checked before issue 18), alternating the two in every round.
The end-to-end comparison is `python -m bench --candidate-command "... ODRADEK_EXP=no-record-checks
python bench/ab_patches.py"` (bench/RESULTS-validation.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from protocol import recordscan
from protocol.records import Compression, SimpleRecord, build_batch
from storage import validation
from storage.config import LogConfig
from storage.validation import AppendOrigin, validate_append

SHAPES = ((100, 5000), (1024, 900))   # record size, records per batch (about 0.5-1 MiB batches)
CODECS = (Compression.NONE, Compression.LZ4, Compression.ZSTD, Compression.SNAPPY, Compression.GZIP)


def _per_record_us(data: bytes, count: int, config: LogConfig, now: int, walk: bool, seconds: float) -> float:
    checks = validation._check_records
    if not walk:
        validation._check_records = lambda batch, config, now, where: None
    try:
        view, runs, began = memoryview(data), 0, time.perf_counter()
        while time.perf_counter() - began < seconds:
            validate_append(view, AppendOrigin.CLIENT, config, now, "bench-0")
            runs += 1
        return (time.perf_counter() - began) / runs / count * 1e6
    finally:
        validation._check_records = checks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.validation_bench")
    parser.add_argument("--seconds", type=float, default=0.5, help="timing window per sample")
    parser.add_argument("--rounds", type=int, default=3, help="alternating samples per cell (median kept)")
    args = parser.parse_args(argv)
    now = int(time.time() * 1000)
    config = LogConfig(max_message_bytes=4 << 20)
    print(f"record walk in C: {recordscan.ACCELERATED}")
    print("| records | codec | batch KiB | validated µs/record | header+CRC only µs/record | walk adds |")
    print("|---|---|---:|---:|---:|---:|")
    for size, count in SHAPES:
        records = [SimpleRecord(value=os.urandom(size // 2).hex().encode(), key=b"k%d" % (i % 64), timestamp=now)
                   for i in range(count)]
        for codec in CODECS:
            data = build_batch(records, compression_type=codec)
            full, bare = [], []
            for _ in range(args.rounds):
                full.append(_per_record_us(data, count, config, now, True, args.seconds))
                bare.append(_per_record_us(data, count, config, now, False, args.seconds))
            full_us, bare_us = statistics.median(full), statistics.median(bare)
            print(f"| {count} × {size} B | {codec.name.lower()} | {len(data) / 1024:.0f} | {full_us:.3f} | "
                  f"{bare_us:.3f} | {full_us - bare_us:+.3f} |")


if __name__ == "__main__":
    main()
