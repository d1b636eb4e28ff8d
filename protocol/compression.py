"""Record-batch compression codecs, framed exactly as Kafka clients frame them.

    compress(codec, data) -> bytes
    decompress(codec, data, max_size=DEFAULT_MAX_DECOMPRESSED) -> bytes

`codec` is the batch's compression id (attributes & 7): 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd.  Every failure (unknown codec, garbage input, output larger than
`max_size`) raises `CompressionError`, never anything else, so a hostile batch
cannot crash or exhaust the caller.

Framing notes:
- snappy: the Java client writes xerial's stream framing (a magic header, then
  length-prefixed raw snappy blocks); librdkafka may write bare raw snappy.  We
  write xerial framing and read both.
- lz4: Kafka (magic 2) uses the standard LZ4 frame format, 64 KiB independent
  blocks, no content size.
- zstd: librdkafka's frames may omit the content size, so decompression always
  streams instead of trusting a size in the frame header.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# A batch is at most a few MiB compressed; refuse decompression bombs well above that.
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # the Java client's default block size
_ZSTD_FEED = 1024


class CompressionError(Exception):
    """Compressed data could not be produced or read."""


def compress(codec: int, data) -> bytes:
    """Compress `data` (any buffer) with the given codec id."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            # wbits=31: gzip container, as java.util.zip.GZIPOutputStream writes.
            co = zlib.compressobj(6, zlib.DEFLATED, 31)
            return co.compress(data) + co.flush()
        if codec == SNAPPY:
            return _xerial_compress(memoryview(data).cast("B"))
        if codec == LZ4:
            return lz4.frame.compress(
                data,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        if codec == ZSTD:
            return zstandard.ZstdCompressor(level=3).compress(data)
    except CompressionError:
        raise
    except Exception as exc:  # the codec libraries raise assorted types
        raise CompressionError(f"{CODEC_NAMES.get(codec, codec)} compression failed: {exc}") from exc
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: int, data, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress `data` (any buffer); output above `max_size` bytes is refused."""
    try:
        if codec == NONE:
            out = bytes(data)
        elif codec == GZIP:
            out = _gzip_decompress(data, max_size)
        elif codec == SNAPPY:
            out = _snappy_decompress(memoryview(data).cast("B"), max_size)
        elif codec == LZ4:
            out = _lz4_decompress(data, max_size)
        elif codec == ZSTD:
            out = _zstd_decompress(data, max_size)
        else:
            raise CompressionError(f"unknown compression codec {codec}")
    except CompressionError:
        raise
    except Exception as exc:
        raise CompressionError(f"corrupt {CODEC_NAMES.get(codec, codec)} data: {exc}") from exc
    if len(out) > max_size:
        raise CompressionError(f"decompressed size exceeds {max_size} bytes")
    return out


def _gzip_decompress(data, max_size: int) -> bytes:
    out = bytearray()
    view = memoryview(data).cast("B")
    while view:
        # wbits=47: accept a gzip or zlib header; loop for concatenated members.
        d = zlib.decompressobj(47)
        out += d.decompress(view, max_size + 1 - len(out))
        if len(out) > max_size:
            raise CompressionError(f"decompressed size exceeds {max_size} bytes")
        if not d.eof:
            raise CompressionError("truncated gzip stream")
        view = memoryview(d.unused_data)
        if view and view[:2] != b"\x1f\x8b":
            break  # trailing padding after the last member, as GZIPInputStream tolerates
    return bytes(out)


def _xerial_compress(view: memoryview) -> bytes:
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(view: memoryview, max_size: int) -> bytes:
    if view[:8] != _XERIAL_MAGIC:
        return _snappy_raw(view, max_size)
    pos, out = 16, bytearray()
    while pos < len(view):
        if pos + 4 > len(view):
            raise CompressionError("truncated xerial snappy block header")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CompressionError("truncated xerial snappy block")
        out += _snappy_raw(view[pos:pos + size], max_size - len(out))
        pos += size
    return bytes(out)


def _snappy_raw(view: memoryview, max_size: int) -> bytes:
    # The raw format starts with the uncompressed length: check it before allocating.
    if cramjam.snappy.decompress_raw_len(view) > max_size:
        raise CompressionError(f"decompressed size exceeds {max_size} bytes")
    return bytes(cramjam.snappy.decompress_raw(view))


def _lz4_decompress(data, max_size: int) -> bytes:
    out = bytearray()
    pending = memoryview(data).cast("B")
    while pending:
        d = lz4.frame.LZ4FrameDecompressor()
        chunk = d.decompress(pending, max_size + 1 - len(out))
        out += chunk
        while not d.eof and not d.needs_input:
            if len(out) > max_size:
                raise CompressionError(f"decompressed size exceeds {max_size} bytes")
            out += d.decompress(b"", max_size + 1 - len(out))
        if len(out) > max_size:
            raise CompressionError(f"decompressed size exceeds {max_size} bytes")
        if not d.eof:
            raise CompressionError("truncated lz4 frame")
        pending = memoryview(d.unused_data or b"")
    return bytes(out)


def _zstd_decompress(data, max_size: int) -> bytes:
    # Fed in small slices so a bomb is caught after a bounded amount of output;
    # frames are decoded one after another until the input is used up.
    out = bytearray()
    pending = memoryview(data).cast("B")
    while pending:
        d = zstandard.ZstdDecompressor().decompressobj()
        pos = 0
        while pos < len(pending) and not d.eof:
            out += d.decompress(pending[pos:pos + _ZSTD_FEED])
            pos += _ZSTD_FEED
            if len(out) > max_size:
                raise CompressionError(f"decompressed size exceeds {max_size} bytes")
        if not d.eof:
            raise CompressionError("truncated zstd frame")
        rest = len(d.unused_data) + max(0, len(pending) - pos)
        pending = pending[len(pending) - rest:]
    return bytes(out)


# -- streaming: the decompressed bytes in bounded chunks ---------------------------------------

STREAM_CHUNK = 1024 * 1024


def decompress_stream(codec: int, data, chunk: int | None = None):
    """Yield the decompressed bytes of `data` in pieces of about `chunk` bytes (never the whole
    output at once), so a batch that inflates to gigabytes can still be walked record by record.
    Raises CompressionError as decompress() does."""
    view = memoryview(data).cast("B")
    chunk = chunk or STREAM_CHUNK
    try:
        if codec == GZIP:
            yield from _gzip_stream(view, chunk)
        elif codec == SNAPPY:
            yield from _snappy_stream(view, chunk)
        elif codec == LZ4:
            yield from _lz4_stream(view, chunk)
        elif codec == ZSTD:
            yield from _zstd_stream(view, chunk)
        elif codec == NONE:
            yield view
        else:
            raise CompressionError(f"unknown compression codec {codec}")
    except CompressionError:
        raise
    except Exception as exc:
        raise CompressionError(f"corrupt {CODEC_NAMES.get(codec, codec)} data: {exc}") from exc


def _gzip_stream(view: memoryview, chunk: int):
    while view:
        d = zlib.decompressobj(47)
        pending = view
        while not d.eof:
            out = d.decompress(pending, chunk)
            pending = d.unconsumed_tail
            if out:
                yield out
            elif not pending:
                break
        if not d.eof:
            raise CompressionError("truncated gzip stream")
        view = memoryview(d.unused_data)
        if view and view[:2] != b"\x1f\x8b":
            break


def _snappy_stream(view: memoryview, chunk: int):
    if view[:8] != _XERIAL_MAGIC:
        yield _snappy_raw(view, DEFAULT_MAX_DECOMPRESSED)
        return
    pos = 16
    while pos < len(view):
        if pos + 4 > len(view):
            raise CompressionError("truncated xerial snappy block header")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CompressionError("truncated xerial snappy block")
        yield _snappy_raw(view[pos:pos + size], DEFAULT_MAX_DECOMPRESSED)
        pos += size


def _lz4_stream(view: memoryview, chunk: int):
    pending = view
    while pending:
        d = lz4.frame.LZ4FrameDecompressor()
        out = d.decompress(pending, chunk)
        if out:
            yield out
        while not d.eof and not d.needs_input:
            out = d.decompress(b"", chunk)
            if out:
                yield out
        if not d.eof:
            raise CompressionError("truncated lz4 frame")
        pending = memoryview(d.unused_data or b"")


def _zstd_stream(view: memoryview, chunk: int):
    # Small input slices bound each piece of output (zstd's decompressobj takes no output limit).
    pending = view
    while pending:
        d = zstandard.ZstdDecompressor().decompressobj()
        pos = 0
        while pos < len(pending) and not d.eof:
            out = d.decompress(pending[pos:pos + _ZSTD_FEED])
            pos += _ZSTD_FEED
            if out:
                yield out
        if not d.eof:
            raise CompressionError("truncated zstd frame")
        rest = len(d.unused_data) + max(0, len(pending) - pos)
        pending = pending[len(pending) - rest:]
