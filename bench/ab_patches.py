"""Odradek launched with experimental monkeypatches: the A/B candidates behind bench/PROFILE.md.

Not product code: each patch is a quick stand-in for a change the owners may make properly, so a
benchmark can say what it would gain before anyone writes it. Pick patches with ODRADEK_EXP
(comma-separated) and compare against plain Odradek in one run:

    python -m bench --quick --targets odradek,peer --candidate-command \
        "env ODRADEK_EXP=ticker,inline-io,switch python bench/ab_patches.py"

- ticker:    the Raft ticker makes its fresh wake-up event after `_execute` (no busy loop; the
             controller has the real fix since 514f784, so this only matters for older trees);
- inline-io: every Produce append and Fetch log read runs on the event loop, big ones too (the
             broker inlines small ones itself since e637c40);
- inline:    every `run_blocking` call inline (hangs the broker: shows why inlining must be selective);
- switch:    `sys.setswitchinterval(0.0002)`, so the event loop gets the GIL back sooner.
- no-record-checks: client batches skip the per-record walk of storage.validation (record count,
             lengths, offset deltas, keys on compacted topics, timestamps, decompression): the
             broker before issue 18's validation, to measure what that validation costs.
- in-flight-N: a connection reads at most N requests ahead of the responses it has written
             (MAX_IN_FLIGHT; Kafka reads a connection's next request only after answering the last).

A patch whose target has been renamed fails at start-up, loudly.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import trio

patches = set(filter(None, os.environ.get("ODRADEK_EXP", "").split(",")))

if "ticker" in patches:
    from broker.controller import quorum

    async def _ticker(self):
        while True:
            with trio.move_on_at(self.node.next_deadline()):
                await self._wakeup.wait()
            async with self._lock:
                await self._execute(self.node.tick(trio.current_time()))
            # After _execute, which sets the old one. (A real fix must also keep a wake-up that a
            # concurrent propose() sets while the ticker is inside _execute.)
            self._wakeup = trio.Event()

    quorum.RaftQuorum._ticker = _ticker

if "inline" in patches:
    import broker.server as server

    async def run_blocking(self, function, *args):
        return function(*args)

    server.Broker.run_blocking = run_blocking

if "inline-io" in patches:
    import broker.server as server

    _threaded = server.Broker.run_blocking
    INLINE = {"PartitionManager.append.<locals>.<lambda>", "PartitionManager.append_many.<locals>.append_all",
              "_read_all"}

    async def run_blocking(self, function, *args):
        if getattr(function, "__qualname__", "") in INLINE:
            return function(*args)  # page-cache append / index lookup: cheaper than a thread hop
        return await _threaded(self, function, *args)

    server.Broker.run_blocking = run_blocking

if "switch" in patches:
    sys.setswitchinterval(0.0002)  # default 0.005: a worker thread may keep the GIL that long

if "no-record-checks" in patches:
    from storage import validation

    validation._check_records = lambda batch, config, now, where: None

in_flight = {patch for patch in patches if patch.startswith("in-flight-")}
if in_flight:
    from broker import connection

    connection.MAX_IN_FLIGHT = int(min(in_flight).removeprefix("in-flight-"))

unknown = patches - in_flight - {"ticker", "inline", "inline-io", "switch", "no-record-checks"}
if unknown:
    sys.exit(f"ab_patches: unknown patches {sorted(unknown)}")

from broker.cli import main  # noqa: E402 - after the patches, on purpose

sys.argv[0] = "odradek"
sys.exit(main())
