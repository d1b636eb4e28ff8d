"""A null sink: the smallest Kafka broker that acknowledges produce requests without storing them.

It is the ceiling for the benchmark: the same librdkafka client against a server that does nothing
but frame, answer and discard, so the table can say how close a real broker gets to what this machine
and this client can do at all. It speaks four APIs, written by hand with `struct`:

- ApiVersions v0-3 (an unknown version gets the v0-format UNSUPPORTED_VERSION answer, as KIP-511 says),
- Metadata v1-4: every named topic exists with ``--partitions`` partitions led by this node,
- Produce v3-7: every partition is acknowledged with offsets counted from the batch headers
  (acks=0 gets no response, as in Kafka),
- Fetch v4, only because librdkafka enables RecordBatch v2 only when the broker has Fetch v4 too:
  nothing is kept, so every log is empty at its end offset (any other offset is out of range), and a
  fetch at the end waits out its max_wait_ms like a long poll that never sees data.

Any other request closes the connection. One thread per connection, blocking sockets: the cheapest
way to serve a handful of clients in CPython.

Run: ``python -m bench.null_sink [--port 0] [--partitions 2]``; it prints
``null-sink: listening on PLAINTEXT://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time

API_PRODUCE, API_FETCH, API_METADATA, API_VERSIONS = 0, 1, 3, 18
SUPPORTED = {API_PRODUCE: (3, 7), API_FETCH: (4, 4), API_METADATA: (1, 4), API_VERSIONS: (0, 3)}
OFFSET_OUT_OF_RANGE, UNSUPPORTED_VERSION = 1, 35
MAX_FETCH_WAIT_S = 1.0
NODE_ID = 0
CLUSTER_ID = "null-sink"

_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
_i64 = struct.Struct(">q")
_header = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_batch_length = struct.Struct(">qi")  # base offset, batch length (bytes after this field)
_BATCH_OVERHEAD = 12
_RECORD_COUNT_AT = 57


class Reader:
    """Cursor over one request frame: just the primitives the four APIs need."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview, pos: int = 0):
        self.buf, self.pos = buf, pos

    def int16(self) -> int:
        (value,) = _i16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return value

    def int32(self) -> int:
        (value,) = _i32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return value

    def int64(self) -> int:
        (value,) = _i64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.buf[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def string(self) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        value = bytes(self.buf[self.pos:self.pos + length]).decode()
        self.pos += length
        return value

    def nbytes(self) -> memoryview | None:
        length = self.int32()
        if length < 0:
            return None
        value = self.buf[self.pos:self.pos + length]
        self.pos += length
        return value

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.pos += self.uvarint()  # size, then skip the value


def _string(value: str | None) -> bytes:
    if value is None:
        return _i16.pack(-1)
    data = value.encode()
    return _i16.pack(len(data)) + data


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _array(items: list[bytes]) -> bytes:
    return _i32.pack(len(items)) + b"".join(items)


def api_versions_body(version: int, error_code: int = 0) -> bytes:
    """ApiVersions response body; v3 is flexible in its body (never in its header)."""
    ranges = sorted(SUPPORTED.items())
    if version >= 3:
        entries = b"".join(struct.pack(">hhh", key, lo, hi) + b"\x00" for key, (lo, hi) in ranges)
        return _i16.pack(error_code) + _uvarint(len(ranges) + 1) + entries + _i32.pack(0) + b"\x00"
    entries = [struct.pack(">hhh", key, lo, hi) for key, (lo, hi) in ranges]
    body = _i16.pack(error_code) + _array(entries)
    return body + _i32.pack(0) if version >= 1 else body


class NullSink:
    """Serves its four APIs on a listening socket until closed; counts what it discarded."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, partitions: int = 1):
        self.partitions = partitions
        self.listener = socket.create_server((host, port), backlog=1024)
        self.host, self.port = self.listener.getsockname()[:2]
        self.records_acked = 0
        self.bytes_acked = 0
        self._offsets: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def serve_forever(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # listener closed
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve_connection, args=(conn,), daemon=True).start()

    def start(self) -> "NullSink":
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        self.listener.close()

    # -- one connection ---------------------------------------------------------------------------

    def _serve_connection(self, conn: socket.socket) -> None:
        size_buf = bytearray(4)
        frame = bytearray(1 << 20)
        try:
            while True:
                if not _recv_exactly(conn, memoryview(size_buf)):
                    return
                (size,) = _i32.unpack(size_buf)
                if size < 8 or size > 100 << 20:
                    return
                if size > len(frame):
                    frame = bytearray(size)
                view = memoryview(frame)[:size]
                if not _recv_exactly(conn, view):
                    return
                response = self._handle(view)
                if response is None:
                    continue
                conn.sendall(_i32.pack(len(response)) + response)
        except (OSError, ValueError, struct.error, IndexError, UnicodeDecodeError):
            return  # a malformed frame or a reset closes the connection
        finally:
            conn.close()

    def _handle(self, frame: memoryview) -> bytes | None:
        api_key, version, correlation_id = _header.unpack_from(frame, 0)
        reader = Reader(frame, _header.size)
        reader.string()  # client_id
        if api_key == API_VERSIONS:
            if version > SUPPORTED[API_VERSIONS][1]:
                return _i32.pack(correlation_id) + api_versions_body(0, UNSUPPORTED_VERSION)
            if version >= 3:
                reader.skip_tagged_fields()
            return _i32.pack(correlation_id) + api_versions_body(version)
        lo, hi = SUPPORTED.get(api_key, (1, 0))
        if not lo <= version <= hi:
            raise ValueError(f"unsupported api {api_key} v{version}")
        if api_key == API_METADATA:
            return _i32.pack(correlation_id) + self._metadata(reader, version)
        if api_key == API_FETCH:
            return _i32.pack(correlation_id) + self._fetch(reader)
        body = self._produce(reader, version)
        return None if body is None else _i32.pack(correlation_id) + body

    def _metadata(self, reader: Reader, version: int) -> bytes:
        count = reader.int32()
        names = [reader.string() for _ in range(max(count, 0))]
        broker = _i32.pack(NODE_ID) + _string(self.host) + _i32.pack(self.port) + _string(None)
        replicas = _array([_i32.pack(NODE_ID)])
        topics = []
        for name in names:
            partitions = [
                _i16.pack(0) + _i32.pack(index) + _i32.pack(NODE_ID) + replicas + replicas
                for index in range(self.partitions)
            ]
            topics.append(_i16.pack(0) + _string(name) + b"\x00" + _array(partitions))
        body = _array([broker])
        if version >= 2:
            body += _string(CLUSTER_ID)
        body += _i32.pack(NODE_ID) + _array(topics)
        return _i32.pack(0) + body if version >= 3 else body

    def _produce(self, reader: Reader, version: int) -> bytes | None:
        reader.string()  # transactional_id
        acks = reader.int16()
        reader.int32()  # timeout_ms
        topics = []
        for _ in range(reader.int32()):
            name = reader.string()
            partitions = []
            for _ in range(reader.int32()):
                index = reader.int32()
                records = reader.nbytes()
                base_offset = self._acknowledge(name, index, records)
                entry = _i32.pack(index) + _i16.pack(0) + struct.pack(">qq", base_offset, -1)
                if version >= 5:
                    entry += struct.pack(">q", 0)  # log_start_offset
                partitions.append(entry)
            topics.append(_string(name) + _array(partitions))
        if acks == 0:
            return None
        return _array(topics) + _i32.pack(0)

    def _fetch(self, reader: Reader) -> bytes:
        reader.int32()  # replica_id
        max_wait_ms = reader.int32()
        reader.int32()  # min_bytes
        reader.int32()  # max_bytes
        reader.pos += 1  # isolation_level
        topics, at_end_everywhere = [], True
        for _ in range(reader.int32()):
            name = reader.string()
            partitions = []
            for _ in range(reader.int32()):
                index, fetch_offset = reader.int32(), reader.int64()
                reader.int32()  # partition_max_bytes
                with self._lock:
                    end = self._offsets.get((name, index), 0)
                error = 0 if fetch_offset == end else OFFSET_OUT_OF_RANGE
                at_end_everywhere &= error == 0
                partitions.append(
                    _i32.pack(index) + _i16.pack(error) + struct.pack(">qq", end, end)
                    + _i32.pack(-1) + _i32.pack(-1)  # no aborted transactions, no records
                )
            topics.append(_string(name) + _array(partitions))
        if at_end_everywhere:
            time.sleep(min(max(max_wait_ms, 0) / 1000, MAX_FETCH_WAIT_S))
        return _i32.pack(0) + _array(topics)

    def _acknowledge(self, topic: str, partition: int, records: memoryview | None) -> int:
        """Counts the records in each batch header (never the records) and hands out offsets."""
        count = pos = 0
        if records is not None:
            while pos + _RECORD_COUNT_AT + 4 <= len(records):
                _, length = _batch_length.unpack_from(records, pos)
                (count_in_batch,) = _i32.unpack_from(records, pos + _RECORD_COUNT_AT)
                count += count_in_batch
                pos += _BATCH_OVERHEAD + length
        with self._lock:
            base = self._offsets.get((topic, partition), 0)
            self._offsets[(topic, partition)] = base + count
            self.records_acked += count
            self.bytes_acked += pos
        return base


def _recv_exactly(conn: socket.socket, view: memoryview) -> bool:
    """Fills view from the socket; False on a clean close before the first byte."""
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            if got:
                raise ConnectionResetError("peer closed mid-frame")
            return False
        got += n
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.null_sink", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--partitions", type=int, default=1)
    args = parser.parse_args(argv)
    sink = NullSink(args.host, args.port, args.partitions)
    print(f"null-sink: listening on PLAINTEXT://{sink.host}:{sink.port}", flush=True)
    try:
        sink.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
