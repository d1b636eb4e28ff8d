"""Hostile appends: whatever the bytes, the log answers with a StorageError carrying a
Kafka error code (or accepts them), and stays readable and consistent."""

import struct

from hypothesis import HealthCheck, given, settings, strategies as st

from protocol import records as r
from storage.errors import StorageError
from storage.log import AppendOrigin

from .conftest import NOW

VALID = r.build_batch([r.SimpleRecord(value=b"v" * 20, key=b"k", timestamp=NOW)] * 3,
                      producer_id=1, producer_epoch=0, base_sequence=0)
MARKER = r.build_control_batch(r.ControlType.ABORT, 1, 0, 0, timestamp=NOW)


def mutate(data: bytes, edits) -> bytes:
    buf = bytearray(data)
    for pos, value in edits:
        if buf:
            buf[pos % len(buf)] = value
    return bytes(buf)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.sampled_from([VALID, MARKER, VALID + VALID, b""]),
       edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
       cut=st.integers(0, 400), tail=st.binary(max_size=40),
       origin=st.sampled_from(list(AppendOrigin)),
       fix_crc=st.booleans())
def test_hostile_appends_get_kafka_errors_only(make_log, base, edits, cut, tail, origin, fix_crc):
    log = make_log({"cleanup.policy": "compact,delete"})
    data = mutate(base, edits)[: max(cut, 0) or None] + tail
    if fix_crc and len(data) >= 61:
        # make the CRC right so the checks behind it get exercised too
        (length,) = struct.unpack_from(">i", data, 8)
        if 49 <= length <= len(data) - 12:
            import crc32c
            buf = bytearray(data)
            struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:12 + length])))
            data = bytes(buf)
    try:
        log.append(data, origin=origin)
    except StorageError as exc:
        assert isinstance(int(exc.error_code), int)
    end = log.log_end_offset
    assert log.offline is None
    offset = log.log_start_offset
    while offset < end:
        batches = log.read_batches(offset)
        assert batches
        for b in batches:
            b.ensure_valid()
            offset = b.last_offset + 1
