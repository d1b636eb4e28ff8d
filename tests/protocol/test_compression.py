import gzip
import struct

import cramjam
import lz4.frame
import pytest
import zstandard

from protocol import compression
from protocol.compression import CompressionError

PAYLOAD = b"".join(b"record-%06d;" % i for i in range(20000))  # ~260 KiB, compressible


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_roundtrip(codec):
    assert compression.decompress(codec, compression.compress(codec, PAYLOAD)) == PAYLOAD
    assert compression.decompress(codec, compression.compress(codec, b"")) == b""


def test_gzip_reads_concatenated_members_and_stdlib_output():
    data = gzip.compress(b"abc") + gzip.compress(b"def")
    assert compression.decompress(1, data) == b"abcdef"


def test_snappy_xerial_framing_is_written_and_raw_is_read():
    framed = compression.compress(2, PAYLOAD)
    assert framed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    # Blocks of 32 KiB, each length-prefixed.
    (first_block,) = struct.unpack_from(">i", framed, 16)
    assert len(bytes(cramjam.snappy.decompress_raw(framed[20:20 + first_block]))) == 32 * 1024
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert compression.decompress(2, raw) == PAYLOAD


def test_lz4_is_a_standard_frame():
    framed = compression.compress(3, PAYLOAD)
    assert framed[:4] == b"\x04\x22\x4d\x18"
    assert lz4.frame.decompress(framed) == PAYLOAD
    # Frames from other writers (with content size, checksums) are read too.
    other = lz4.frame.compress(PAYLOAD, store_size=True, content_checksum=True)
    assert compression.decompress(3, other) == PAYLOAD


def test_zstd_frames_without_content_size_are_streamed():
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert compression.decompress(4, frame) == PAYLOAD
    two = frame + zstandard.ZstdCompressor().compress(b"tail")
    assert compression.decompress(4, two) == PAYLOAD + b"tail"


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_raises_compression_error_only(codec):
    for junk in (b"\x00" * 7, b"not compressed at all, really", bytes(range(256))):
        with pytest.raises(CompressionError):
            compression.decompress(codec, junk)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_input_is_refused(codec):
    data = compression.compress(codec, PAYLOAD)
    with pytest.raises(CompressionError):
        compression.decompress(codec, data[: len(data) // 2])


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb_is_refused(codec):
    bomb = compression.compress(codec, b"\x00" * (4 * 1024 * 1024))
    with pytest.raises(CompressionError):
        compression.decompress(codec, bomb, max_size=1024 * 1024)


def test_unknown_codec():
    with pytest.raises(CompressionError):
        compression.compress(7, b"x")
    with pytest.raises(CompressionError):
        compression.decompress(5, b"x")
