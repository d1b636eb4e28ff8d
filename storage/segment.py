"""One log segment: `<base offset>.log` plus its `.index` and `.timeindex`.

The `.log` file holds record batches exactly as served to clients.  The segment
knows its size, its next offset (once loaded), its largest timestamp, and how
to find the batch that contains an offset, the batch boundary at or before a
file position, and the first batch at or after a timestamp.  It never parses
records except where a caller asks for them.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator

from protocol.records import (
    HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, NO_TIMESTAMP, RecordBatch, RecordBatchError,
)
from storage.files import FileSlice, OpenFiles, SharedFile
from storage.index import OffsetIndex, TimeIndex
from storage.txn_index import TxnIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)

_OFFSET_ENTRY = OffsetIndex.ENTRY.size
_TIME_ENTRY = TimeIndex.ENTRY.size
_SCAN_CHUNK = 16 * 1024
_RECOVER_CHUNK = 1024 * 1024


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


class LogSegment:
    def __init__(self, directory: str, base_offset: int, handles: OpenFiles, *,
                 created_ms: int = 0, suffix: str = "", new: bool = False):
        """`new`: the directory was just created, so the file cannot exist yet."""
        self.directory = directory
        self.base_offset = base_offset
        self.handles = handles
        self.suffix = suffix  # "" for a live segment, ".cleaned"/".swap" while compaction writes it
        prefix = os.path.join(directory, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX + suffix
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX + suffix, base_offset, writable=False, new=new)
        self.time_index = TimeIndex(prefix + TIMEINDEX_SUFFIX + suffix, base_offset, writable=False, new=new)
        self.txn_index = TxnIndex(prefix + TXNINDEX_SUFFIX + suffix)
        self._file: SharedFile | None = None
        try:
            if new:
                raise FileNotFoundError(self.log_path)
            self.size = os.path.getsize(self.log_path)
        except FileNotFoundError:
            self.size = 0
            self._open()  # creates the file
        # Known for the active segment; for sealed ones the next segment's base bounds it.
        self.next_offset: int | None = base_offset if self.size == 0 else None
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp = NO_TIMESTAMP
        self.created_ms = created_ms
        self.bytes_since_last_index = 0
        self.roll_jitter_ms: int | None = None  # drawn by the log from segment.jitter.ms
        self.active = False

    # -- handles ------------------------------------------------------------------
    def _open(self) -> SharedFile:
        f = self._file
        if f is None:
            f = self._file = SharedFile(self.log_path)
        self.handles.touch(self)
        return f

    def file(self) -> SharedFile:
        return self._open()

    def release(self) -> None:
        """Called by the LRU: drop descriptors and mappings; they reopen on demand."""
        self._file = None
        self.offset_index.release()
        self.time_index.release()
        self.txn_index.release()

    # -- loading ------------------------------------------------------------------------
    def load_sealed(self) -> None:
        """Cheap metadata for a sealed segment: the largest timestamp from its time index."""
        last = self.time_index.last_entry()
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        elif self.size:
            for _, batch in self.iter_headers(0, self.size):
                self._note_timestamp(batch)
        # Start-up touches every segment: keep no descriptor or mapping open for it.
        self.release()

    def activate(self) -> None:
        """Become the active segment: writable indexes and an exact next offset,
        found by scanning forward from the last offset-index entry."""
        self.offset_index.make_writable()
        self.time_index.make_writable()
        last = self.time_index.last_entry()
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        _, position = self.offset_index.last_entry()
        next_offset = self.base_offset
        end = position
        for pos, batch in self.iter_headers(position, self.size):
            next_offset = batch.next_offset
            end = pos + batch.size
            self._note_timestamp(batch)
            if self.first_batch_timestamp == NO_TIMESTAMP and pos == 0:
                self.first_batch_timestamp = batch.max_timestamp
        if self.first_batch_timestamp == NO_TIMESTAMP and self.size:
            first = self.batch_at(0)
            if first is not None:
                self.first_batch_timestamp = first.max_timestamp
        if position and next_offset == self.base_offset:
            next_offset = self.offset_index.last_entry()[0] + 1
        if end < self.size:
            # Bytes after the last whole batch (a torn write): appends must not land
            # behind them, so they go.
            f = self._open()
            os.ftruncate(f.fd, end)
            self.size = end
        self.next_offset = next_offset
        self.bytes_since_last_index = end - position
        self.active = True

    def _note_timestamp(self, batch: RecordBatch) -> None:
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp = batch.max_timestamp
            self.offset_of_max_timestamp = batch.last_offset

    # -- appends ----------------------------------------------------------------------
    def write(self, buffers: list, nbytes: int) -> None:
        """Write buffers at the end of the file; on failure the file is cut back."""
        f = self._open()
        position = self.size
        written = 0
        try:
            while written < nbytes:
                n = os.pwritev(f.fd, buffers, position + written) if len(buffers) <= 1024 else \
                    _pwrite_all(f.fd, buffers, position + written)
                if n <= 0:
                    raise OSError("write returned 0 bytes")
                written += n
                if written < nbytes:
                    buffers = _skip(buffers, n)
        except OSError:
            try:
                os.ftruncate(f.fd, position)
            except OSError:
                pass
            raise

    def note_appended(self, position: int, batch: RecordBatch, last_offset: int, max_timestamp: int,
                      index_interval: int) -> None:
        """Account for one batch written at `position` (indexes, timestamps, size)."""
        size = batch.size
        if self.bytes_since_last_index > index_interval:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index = 0
        self.bytes_since_last_index += size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if position == 0:
            self.first_batch_timestamp = max_timestamp
        self.size = position + size
        self.next_offset = last_offset + 1

    def index_full(self, max_index_bytes: int) -> bool:
        # (entry counts read directly: this runs on every append)
        return ((self.offset_index._count + 1) * _OFFSET_ENTRY > max_index_bytes
                or (self.time_index._count + 1) * _TIME_ENTRY > max_index_bytes)

    def seal(self) -> None:
        """Stop being the active segment (on roll): record the final largest timestamp."""
        if self.max_timestamp != NO_TIMESTAMP:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        for index in (self.offset_index, self.time_index):
            index.create_if_missing()   # a sealed segment has both files, as Kafka's do
            index.seal()
        self.active = False

    def flush(self) -> None:
        f = self._open()
        os.fsync(f.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    # -- lookups ----------------------------------------------------------------------
    def iter_headers(self, start: int, end: int) -> Iterator[tuple[int, RecordBatch]]:
        """(position, header view) of each batch in [start, end).  Header fields only:
        the view's buffer may not hold the batch's body.  Stops at a torn tail."""
        f = self._open()
        pos = start
        while pos + LOG_OVERHEAD <= end:
            data = os.pread(f.fd, min(_SCAN_CHUNK, end - pos), pos)
            off = 0
            while off + HEADER_SIZE <= len(data):
                try:
                    batch = RecordBatch(data, off)
                except RecordBatchError:
                    return  # not a v2 batch: treated as the end (recovery cuts it off)
                if batch.batch_length < MIN_BATCH_LENGTH or pos + off + batch.size > end:
                    return
                yield pos + off, batch
                off += batch.size
            if off == 0:
                return  # a header cut short: the end of what was written
            pos += off

    def batch_at(self, position: int) -> RecordBatch | None:
        """The header of the batch at a position (None past the end)."""
        if position + HEADER_SIZE > self.size:
            return None
        f = self._open()  # a local reference keeps the descriptor open
        data = os.pread(f.fd, HEADER_SIZE, position)
        if len(data) < HEADER_SIZE:
            return None
        return RecordBatch(data, 0)

    def read_batch(self, position: int, size: int) -> RecordBatch:
        """A whole batch (records included) read into memory."""
        f = self._open()  # a local reference keeps the descriptor open
        data = os.pread(f.fd, size, position)
        return RecordBatch(data, 0)

    def find_batch(self, offset: int, start: int = 0) -> tuple[int, RecordBatch] | None:
        """Position and header of the first batch whose last offset >= offset."""
        _, position = self.offset_index.lookup(offset)
        for pos, batch in self.iter_headers(max(position, start), self.size):
            if batch.last_offset >= offset:
                return pos, batch
        return None

    def boundary_at_or_before(self, start: int, limit: int) -> int:
        """The largest batch end in (start, limit], or `start` if the first batch crosses it."""
        _, position = self.offset_index.lookup_position(limit)
        end = start
        for pos, batch in self.iter_headers(max(position, start), self.size):
            if pos + batch.size > limit:
                break
            end = pos + batch.size
        return end

    def slice(self, position: int, length: int) -> FileSlice:
        return FileSlice(self._open(), position, length)

    def find_timestamp(self, timestamp: int, min_offset: int):
        """(pos, batch header) of the first batch holding a record with ts >= timestamp
        at offset >= min_offset; records must then be checked by the caller."""
        hit = self.time_index.lookup_before(timestamp)
        start = 0
        if hit is not None:
            _, start = self.offset_index.lookup(hit[1])
        for pos, batch in self.iter_headers(start, self.size):
            if batch.max_timestamp >= timestamp and batch.last_offset >= min_offset:
                yield pos, batch

    # -- recovery and truncation -----------------------------------------------------
    def recover(self, on_batch: Callable[[int, RecordBatch], None] | None = None,
                index_interval: int = 4096, rebuild_txn_index: bool = False) -> int:
        """Validate every batch, rebuild both indexes, cut the file at the first bad
        batch.  Returns the number of bytes truncated."""
        self.offset_index.make_writable()
        self.time_index.make_writable()
        self.offset_index.reset()
        self.time_index.reset()
        if rebuild_txn_index:
            self.txn_index.reset()  # the caller's on_batch rebuilds it from the markers
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = NO_TIMESTAMP
        self.bytes_since_last_index = 0
        f = self._open()
        file_size = os.fstat(f.fd).st_size
        pos = 0
        next_offset = self.base_offset
        while pos < file_size:
            data = os.pread(f.fd, min(_RECOVER_CHUNK, file_size - pos), pos)
            view = memoryview(data)
            off = 0
            progressed = False
            while off + LOG_OVERHEAD <= len(data):
                try:
                    batch = RecordBatch(view, off) if off + HEADER_SIZE <= len(data) else None
                except RecordBatchError:
                    batch = None
                    data = b""  # bad magic: stop here
                    break
                if batch is None:
                    break
                if batch.batch_length < MIN_BATCH_LENGTH:
                    data = b""
                    break
                if off + batch.size > len(data):
                    if pos + off + batch.size > file_size:
                        data = b""  # torn tail
                    elif off == 0:  # a batch larger than the chunk: read it whole
                        view = memoryview(os.pread(f.fd, batch.size, pos))
                        batch = RecordBatch(view, 0)
                        if not self._accept(batch, next_offset):
                            data = b""
                            break
                        self._recovered(pos, batch, on_batch, index_interval)
                        next_offset = batch.next_offset
                        off = batch.size
                        progressed = True
                    break
                if not self._accept(batch, next_offset):
                    data = b""
                    break
                self._recovered(pos + off, batch, on_batch, index_interval)
                next_offset = batch.next_offset
                off += batch.size
                progressed = True
            pos += off
            if not data or not progressed:
                break
        truncated = file_size - pos
        if truncated:
            os.ftruncate(f.fd, pos)
        self.size = pos
        self.next_offset = next_offset
        return truncated

    @staticmethod
    def _accept(batch: RecordBatch, next_offset: int) -> bool:
        return (batch.base_offset >= next_offset and batch.last_offset_delta >= 0
                and batch.compute_crc() == batch.crc)

    def _recovered(self, position: int, batch: RecordBatch, on_batch, index_interval: int) -> None:
        self.note_appended(position, batch, batch.last_offset, batch.max_timestamp, index_interval)
        if on_batch is not None:
            on_batch(position, batch)

    def truncate_to(self, offset: int) -> int:
        """Remove batches whose last offset >= offset.  Returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position, batch = found  # a batch straddling the target goes as a whole
        removed = self.size - position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to(batch.base_offset)
        self.txn_index.truncate_to(batch.base_offset)
        f = self._open()  # a local reference keeps the descriptor open
        os.ftruncate(f.fd, position)
        self.size = position
        self.next_offset = None
        # Recompute timestamps and the exact next offset from what is left.
        self.max_timestamp = NO_TIMESTAMP
        self.first_batch_timestamp = NO_TIMESTAMP
        self.activate()
        return removed

    # -- files ---------------------------------------------------------------------------
    def paths(self) -> list[str]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def close(self) -> None:
        # The largest timestamp goes into the time index, as Kafka's close does, unless the index
        # has no file yet: then the segment has no entry to find, and the next start reads it whole.
        if self.active and self.max_timestamp != NO_TIMESTAMP and self.time_index.entries:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.close()
        self.time_index.close()
        self._file = None
        self.handles.forget(self)

    def rename_all(self, new_suffix: str) -> None:
        """Give every file of the segment a new suffix (".deleted", "" after a swap, ...)."""
        self.close()
        prefix = os.path.join(self.directory, filename_prefix(self.base_offset))
        for stem in SEGMENT_SUFFIXES:
            old = prefix + stem + self.suffix
            if os.path.exists(old):
                os.replace(old, prefix + stem + new_suffix)
        self.suffix = new_suffix
        self.log_path = prefix + LOG_SUFFIX + new_suffix
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX + new_suffix, self.base_offset, writable=False)
        self.time_index = TimeIndex(prefix + TIMEINDEX_SUFFIX + new_suffix, self.base_offset, writable=False)
        self.txn_index = TxnIndex(prefix + TXNINDEX_SUFFIX + new_suffix)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path!r}, size={self.size}, next_offset={self.next_offset})"


def finish_swap(directory: str, base_offset: int) -> None:
    """Move a segment's `.swap` files to their live names.  Once the log file is
    `.swap` the swap is committed; live indexes without a `.swap` replacement are
    stale then and are removed (start-up rebuilds them)."""
    prefix = os.path.join(directory, filename_prefix(base_offset))
    if os.path.exists(prefix + LOG_SUFFIX + SWAP_SUFFIX):
        for stem in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):
            if not os.path.exists(prefix + stem + SWAP_SUFFIX) and os.path.exists(prefix + stem):
                os.remove(prefix + stem)
    for stem in SEGMENT_SUFFIXES:  # the log file first: the commit point
        if os.path.exists(prefix + stem + SWAP_SUFFIX):
            os.replace(prefix + stem + SWAP_SUFFIX, prefix + stem)
    from storage.checkpoints import fsync_dir
    fsync_dir(directory)


def _skip(buffers: list, n: int) -> list:
    """The buffers left after a short write of n bytes."""
    out = []
    for buf in buffers:
        length = len(buf)
        if n >= length:
            n -= length
            continue
        out.append(memoryview(buf)[n:] if n else buf)
        n = 0
    return out


def _pwrite_all(fd: int, buffers: list, position: int) -> int:
    written = 0
    for start in range(0, len(buffers), 1024):
        chunk = buffers[start:start + 1024]
        n = os.pwritev(fd, chunk, position + written)
        written += n
        if n < sum(len(b) for b in chunk):
            break
    return written
