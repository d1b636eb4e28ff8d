"""TlsWriter (the TLS connection's write side) over a real TLS session on a socket pair: every byte
arrives in order through partial writes, file slices and buffer boundaries, in full-size records."""

from __future__ import annotations

import os
import socket
import ssl
import struct

import pytest
import trio

from broker.connection import CloseConnection
from broker.connection_writes import SlicedRecords
from broker.security.pki import make_pki
from broker.security.tls_writer import STAGING_SIZE, TlsWriter
from storage.files import FileSlice, SharedFile

MAX_RECORD = 16384


@pytest.fixture(scope="module")
def contexts(tmp_path_factory):
    pki = make_pki(str(tmp_path_factory.mktemp("pki")))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pki.path("server.pem"))
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(pki.path("ca.pem"))
    client.check_hostname = False
    return server, client


def _handshake(server_ctx, client_ctx):
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_ctx.wrap_bio(server_in, server_out, server_side=True)
    client = client_ctx.wrap_bio(client_in, client_out, server_hostname="localhost")
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    assert server.version() == client.version() == "TLSv1.3"
    return server, server_out, client, client_in


def _records(ciphertext: bytes) -> list[int]:
    """The length field of every TLS record in `ciphertext` (application data only)."""
    lengths, position = [], 0
    while position < len(ciphertext):
        content_type, _, length = struct.unpack_from(">BHH", ciphertext, position)
        assert content_type == 23
        lengths.append(length)
        position += 5 + length
    assert position == len(ciphertext)
    return lengths


class _CountingTls:
    """The server's SSLObject, counting the plaintext each write hands to OpenSSL."""

    def __init__(self, tls_object):
        self._tls, self.writes = tls_object, []

    def write(self, data):
        self.writes.append(len(data))
        return self._tls.write(data)


def _run_writer(contexts, parts, held_back=b"", sndbuf=None, tls_writes=None):
    """Send `parts` through a TlsWriter; returns (plaintext the client decrypted, ciphertext).
    `tls_writes`, a list, gets the size of every SSLObject.write."""
    server, server_out, client, client_in = _handshake(*contexts)
    counting = _CountingTls(server)

    async def main():
        left, right = trio.socket.socketpair()
        if sndbuf:
            left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)   # partial writes
        ciphertext = bytearray()

        async def read_all():
            while True:
                chunk = await right.recv(5000)
                if not chunk:
                    return
                ciphertext.extend(chunk)
                await trio.sleep(0)

        with left, right:
            writer = TlsWriter(counting, server_out, left, held_back)
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(read_all)
                    await writer.send(parts)
                    left.shutdown(socket.SHUT_WR)
        return bytes(ciphertext)

    ciphertext = trio.run(main)
    if tls_writes is not None:
        tls_writes.extend(counting.writes)
    assert ciphertext.startswith(held_back)
    application_data = ciphertext[len(held_back):]
    client_in.write(application_data)
    plaintext = bytearray()
    while True:
        try:
            chunk = client.read(1 << 20)
        except ssl.SSLWantReadError:
            break
        if not chunk:
            break
        plaintext += chunk
    return bytes(plaintext), application_data


def _file_slices(tmp_path, content: bytes, cuts):
    path = tmp_path / "segment"
    path.write_bytes(content)
    shared = SharedFile(str(path), os.O_RDONLY)
    return [FileSlice(shared, start, end - start) for start, end in zip(cuts, cuts[1:])]


def test_parts_arrive_in_order_through_partial_writes(contexts, tmp_path):
    content = os.urandom(3 * STAGING_SIZE + 12345)
    slices = _file_slices(tmp_path, content, [0, 100, 70000, STAGING_SIZE + 5, len(content)])
    big = memoryview(bytearray(os.urandom(200_000)))   # encrypted where it is
    huge = os.urandom(2 * STAGING_SIZE + 999)           # ... a buffer's worth at a time
    parts = [b"\x00\x00\x01\x02", b"header" * 10, slices[0], SlicedRecords(slices[1:3]), b"",
             big, bytearray(b"tail" * 3000), slices[3], huge, b"end"]
    expected = b"".join(bytes(p) if not isinstance(p, (FileSlice, SlicedRecords)) else
                        b"".join(s.read() for s in getattr(p, "slices", [p])) for p in parts)
    plaintext, _ = _run_writer(contexts, parts, sndbuf=4096)
    assert plaintext == expected


def test_records_are_full_sized_and_bytes_held_back_go_first(contexts, tmp_path):
    content = os.urandom(2 * STAGING_SIZE)
    slices = _file_slices(tmp_path, content, [0, 1000, len(content)])
    small = [bytes([i]) * 9999 for i in range(60)]   # overflow the buffer mid-part
    parts = [b"\x00\x00\x00\x10", b"small response header", slices[0], slices[1], *small, b"!"]
    held_back = b"\x17\x03\x03\x00\x01X"   # stands in for trio's delayed session tickets
    plaintext, ciphertext = _run_writer(contexts, parts, held_back=held_back)
    assert plaintext == b"".join([parts[0], parts[1], content, *small, parts[-1]])
    lengths = _records(ciphertext)
    overhead = lengths[0] - MAX_RECORD
    assert 0 < overhead <= 256
    # small parts share records with the file bytes: every record but the last is full
    assert all(length == MAX_RECORD + overhead for length in lengths[:-1])
    assert len(lengths) == -(-len(plaintext) // MAX_RECORD)


def test_a_default_partition_fetch_goes_out_in_four_buffers(contexts, tmp_path):
    # 1 MiB of records (max.partition.fetch.bytes' default in Kafka's clients) and its headers:
    # four full-sized passes through OpenSSL and the socket, not four and a sliver of a fifth
    content = os.urandom(1 << 20)
    (records,) = _file_slices(tmp_path, content, [0, len(content)])
    parts = [b"\x00\x10\x00\x70", b"h" * 60, SlicedRecords([records]), b"t" * 40]
    tls_writes: list[int] = []
    plaintext, ciphertext = _run_writer(contexts, parts, tls_writes=tls_writes)
    assert plaintext == b"".join([parts[0], parts[1], content, parts[3]])
    assert len(tls_writes) == 4 and min(tls_writes) > STAGING_SIZE // 2
    lengths = _records(ciphertext)   # full records (16 KiB + the AEAD's overhead) but the tail
    assert lengths.count(lengths[0]) == len(plaintext) // MAX_RECORD


def test_a_file_shorter_than_its_slice_closes_the_connection(contexts, tmp_path):
    content = os.urandom(5000)
    (slice_,) = _file_slices(tmp_path, content, [0, 5000])
    slice_.length = 9000   # the segment was truncated under the response
    with pytest.raises(BaseExceptionGroup) as raised:   # out of the test's nursery
        _run_writer(contexts, [b"x", slice_])
    assert raised.group_contains(CloseConnection, match="shorter than announced")
