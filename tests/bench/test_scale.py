"""Pieces of the --scale rows that can be checked without 10,000 partitions."""

from __future__ import annotations

import struct
import time

import pytest

from bench import scale
from bench.null_sink import NullSink

pytestmark = pytest.mark.timeout(60)


def test_full_metadata_request_asks_for_every_topic():
    frame = scale.full_metadata_request(9)
    size, api_key, version, correlation_id, client_len = struct.unpack_from(">ihhih", frame)
    assert (size, api_key, version, correlation_id) == (len(frame) - 4, 3, 4, 9)
    body = frame[4 + 10 + client_len:]
    assert body == struct.pack(">ib", -1, 0)  # topics null (all), no auto-creation


def test_stall_probe_times_round_trips_until_stopped():
    sink = NullSink(partitions=1).start()
    try:
        with scale.StallProbe(f"{sink.host}:{sink.port}", interval=0.005) as probe:
            deadline = time.monotonic() + 20
            while probe.longest_ms == 0.0 and time.monotonic() < deadline:
                time.sleep(0.01)
        assert probe.error is None
        assert 0.0 < probe.longest_ms < 20_000
        assert not probe._thread.is_alive()
    finally:
        sink.close()
