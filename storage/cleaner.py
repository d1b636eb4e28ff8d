"""Log compaction (cleanup.policy=compact), as Kafka's LogCleaner does it.

One pass over a log:
1. The dirty section runs from the cleaner checkpoint to the first uncleanable
   offset: the active segment, the first open transaction (LSO) and segments
   younger than min.compaction.lag.ms are never cleaned.  A pass runs when
   dirty / total bytes >= min.cleanable.dirty.ratio (or max.compaction.lag.ms
   has passed for the oldest dirty data).
2. An offset map (key -> last offset) is built over the dirty section, leaving
   out control batches and records of aborted transactions.
3. The segments below the first uncleanable offset are grouped as Kafka groups
   them (`_groups`: consecutive segments whose log and index bytes fit one
   segment), so segments an earlier pass shrank or emptied merge instead of
   piling up as small or 0-byte files. Each group is rewritten into one
   `<first base>.log.cleaned` (+ indexes): a record stays if it is its key's latest; a
   tombstone stays until its batch's delete horizon (now + delete.retention.ms,
   stamped in the batch header on the first pass) has passed; aborted
   transactional data goes; a commit/abort marker goes once its horizon passed.
   Offsets never change; a batch whose records all stay is copied byte for byte,
   otherwise it is rebuilt with its own codec, base offset, last offset delta and
   producer fields; an emptied batch that holds a producer's last sequence stays
   as an empty batch so idempotence survives.
4. The cleaned files replace the originals atomically: `.cleaned` -> `.swap`
   (the log file first), the group's other segments deleted, -> live name.  A
   crash before the `.swap` rename leaves the originals; after it, start-up
   completes the swap and drops what is left of segments the swapped one covers
   (see Log._load and `drop_absorbed`).

The work runs outside the partition lock; only the swap takes it, and a segment
that disappeared meanwhile (retention, truncation) just drops its cleaned copy.
"""

from __future__ import annotations

import dataclasses
import os

from protocol.records import NO_TIMESTAMP, RecordBatch, TimestampType, build_batch
from storage.checkpoints import fsync_dir
from storage.segment import (
    CLEANED_SUFFIX, SEGMENT_SUFFIXES, SWAP_SUFFIX, LogSegment, filename_prefix, finish_swap,
)


DEFAULT_MAX_KEYS = 1_000_000
MAX_RELATIVE_OFFSET = 2**31 - 1   # an index entry holds an offset relative to its segment's base


@dataclasses.dataclass
class CleanerStats:
    segments: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    batches_rebuilt: int = 0
    end_offset: int = 0


def dirty_section(log, now_ms: int):
    """(first dirty offset, first uncleanable offset, clean bytes, dirty bytes, candidate segments)."""
    segments = log.segments
    config = log.config
    first_dirty = max(log.cleaner_checkpoint, log.log_start_offset)
    limit = segments[-1].base_offset
    unstable = log.first_unstable_offset
    if unstable is not None:
        limit = min(limit, unstable)
    limit = min(limit, max(log.high_watermark, log.log_start_offset))
    candidates = []
    clean_bytes = dirty_bytes = 0
    for i, segment in enumerate(segments[:-1]):
        upper = segments[i + 1].base_offset
        if upper > limit:
            break
        if config.min_compaction_lag_ms > 0 and segment.max_timestamp != NO_TIMESTAMP and \
                now_ms - segment.max_timestamp < config.min_compaction_lag_ms:
            break
        candidates.append((segment, upper))
        if upper <= first_dirty:
            clean_bytes += segment.size
        else:
            dirty_bytes += segment.size
    end = candidates[-1][1] if candidates else first_dirty
    return first_dirty, end, clean_bytes, dirty_bytes, candidates


def needs_cleaning(log, now_ms: int) -> bool:
    config = log.config
    if not config.compact or log.offline is not None:
        return False
    first_dirty, _end, clean_bytes, dirty_bytes, candidates = dirty_section(log, now_ms)
    if not dirty_bytes:
        return False
    if dirty_bytes / (clean_bytes + dirty_bytes) >= config.min_cleanable_dirty_ratio:
        return True
    # max.compaction.lag.ms: dirty data older than that must be cleaned regardless of the ratio.
    for segment, upper in candidates:
        if upper > first_dirty and segment.max_timestamp != NO_TIMESTAMP:
            return now_ms - segment.max_timestamp > config.max_compaction_lag_ms
    return False


def clean(log, now_ms: int | None = None, *, force: bool = False,
          max_keys: int = DEFAULT_MAX_KEYS) -> CleanerStats | None:
    """One cleaning pass; returns stats, or None when nothing was due.

    The offset map holds at most `max_keys` keys (Kafka bounds it by
    log.cleaner.dedupe.buffer.size): when it fills, the pass stops at the end of the
    segment being read and the rest waits for the next pass."""
    now = log.clock() if now_ms is None else now_ms
    if not force and not needs_cleaning(log, now):
        return None
    first_dirty, end, _clean, dirty_bytes, candidates = dirty_section(log, now)
    if not candidates or not dirty_bytes:
        return None
    try:
        aborted = _aborted_ranges(log, candidates[0][0].base_offset, end)
        stats = CleanerStats()
        offset_map, end = _build_offset_map(candidates, first_dirty, aborted, stats, max_keys)
    except OSError:
        if all(_still_live(log, segment) for segment, _ in candidates):
            raise
        return None  # retention or truncation removed segments meanwhile: try again later
    stats.end_offset = end
    horizon = now + log.config.delete_retention_ms
    last_offsets = log.producer_last_offsets()
    open_txns: dict[int, bool] = {}  # producer id -> its current transaction kept some data
    for group in _groups(candidates, end, log.config):
        try:
            cleaned = _clean_group(log, group, offset_map, aborted, last_offsets, now, horizon, stats, open_txns)
        except OSError:
            if all(_still_live(log, segment) for segment in group):
                raise
            continue
        if log.swap_cleaned_segments(group, cleaned):
            stats.segments += len(group)
    log.cleaner_checkpoint = max(log.cleaner_checkpoint, end)
    return stats


def _groups(candidates, end: int, config) -> list[list[LogSegment]]:
    """The segments below `end` in runs that are each cleaned into one segment, as Kafka groups
    them: consecutive segments while their log bytes fit `segment.bytes`, each index's bytes
    `segment.index.bytes`, and their offsets an index's relative offsets (sizes before cleaning,
    so what a pass shrinks merges on a later one)."""
    groups: list[list[LogSegment]] = []
    totals = (0, 0, 0)
    for segment, upper in candidates:
        if upper > end:
            break
        sizes = (segment.size, segment.offset_index.size_bytes, segment.time_index.size_bytes)
        if groups:
            merged = tuple(a + b for a, b in zip(totals, sizes))
            if (merged[0] <= config.segment_bytes and max(merged[1:]) <= config.segment_index_bytes
                    and (segment.size == 0 or upper - 1 - groups[-1][0].base_offset <= MAX_RELATIVE_OFFSET)):
                groups[-1].append(segment)
                totals = merged
                continue
        groups.append([segment])
        totals = sizes
    return groups


def _still_live(log, segment: LogSegment) -> bool:
    return any(s is segment for s in log.segments)


def _aborted_ranges(log, start: int, end: int) -> dict[int, list[tuple[int, int]]]:
    ranges: dict[int, list[tuple[int, int]]] = {}
    for txn in log.aborted_transactions(start, end):
        ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return ranges


def _is_aborted(batch: RecordBatch, aborted) -> bool:
    if not batch.is_transactional or batch.producer_id not in aborted:
        return False
    return any(first <= batch.base_offset <= last for first, last in aborted[batch.producer_id])


def _batches(segment: LogSegment):
    for pos, header in segment.iter_headers(0, segment.size):
        yield segment.read_batch(pos, header.size)


def _build_offset_map(candidates, first_dirty: int, aborted, stats, max_keys: int):
    """key -> last offset over the dirty segments; returns (map, end offset covered)."""
    offset_map: dict[bytes, int] = {}
    end = first_dirty
    for segment, upper in candidates:
        if upper <= first_dirty:
            continue
        if len(offset_map) >= max_keys:
            break
        for batch in _batches(segment):
            stats.bytes_read += batch.size
            if batch.is_control or _is_aborted(batch, aborted) or batch.last_offset < first_dirty:
                continue
            for record in batch.records():
                if record.key is not None:
                    offset_map[record.key] = record.offset
        end = upper
    return offset_map, end


def _clean_group(log, group: list[LogSegment], offset_map, aborted, last_offsets, now: int,
                 horizon: int, stats: CleanerStats, open_txns: dict[int, bool]) -> LogSegment:
    """The group's retained batches in one `.cleaned` segment at its first base offset."""
    directory = group[0].directory
    prefix = os.path.join(directory, filename_prefix(group[0].base_offset))
    for stem in SEGMENT_SUFFIXES:
        for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
            if os.path.exists(prefix + stem + suffix):
                os.remove(prefix + stem + suffix)
    cleaned = LogSegment(directory, group[0].base_offset, log.handles, created_ms=now, suffix=CLEANED_SUFFIX)
    try:
        cleaned.activate()
        interval = log.config.index_interval_bytes
        for batch in (batch for segment in group for batch in _batches(segment)):
            data = _retained(batch, offset_map, aborted, last_offsets, now, horizon, stats, open_txns)
            if data is None:
                continue
            out = RecordBatch(data, 0)
            position = cleaned.size
            cleaned.write([data], len(data))
            cleaned.note_appended(position, out, out.last_offset, out.max_timestamp, interval)
            stats.bytes_written += len(data)
        entries = [entry for segment in group for entry in segment.txn_index.entries]
        if entries:
            cleaned.txn_index.rewrite(entries)
        cleaned.seal()
        cleaned.flush()
    except BaseException:
        _discard(cleaned)  # e.g. an undecodable batch: no half-written copy left behind
        raise
    return cleaned


def _discard(cleaned: LogSegment) -> None:
    try:
        cleaned.close()
    except (OSError, ValueError):
        pass
    for path in cleaned.paths():
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def _retained(batch: RecordBatch, offset_map, aborted, last_offsets, now: int, horizon: int,
              stats: CleanerStats, open_txns: dict[int, bool]):
    """The bytes to keep for one batch (the original view, a rebuilt batch) or None."""
    if batch.is_control:
        # A marker stays while any batch of its transaction stays (else a replay of the
        # log would see that transaction as open), and until its delete horizon.
        if open_txns.pop(batch.producer_id, False):
            return batch.view()
        if batch.has_delete_horizon:
            return None if now >= batch.delete_horizon_ms else batch.view()
        return _rebuild(batch, list(batch.records()), horizon, stats)
    data = _retained_data(batch, offset_map, aborted, last_offsets, now, horizon, stats)
    if data is not None and batch.is_transactional:
        open_txns[batch.producer_id] = True
    return data


def _retained_data(batch: RecordBatch, offset_map, aborted, last_offsets, now: int, horizon: int,
                   stats: CleanerStats):
    records = list(batch.records())
    if _is_aborted(batch, aborted):
        kept = []
    else:
        horizon_passed = batch.has_delete_horizon and now >= batch.delete_horizon_ms
        kept = [rec for rec in records
                if rec.key is not None and offset_map.get(rec.key, rec.offset) <= rec.offset
                and not (rec.value is None and horizon_passed)]
    stats.records_removed += len(records) - len(kept)
    has_tombstone = any(rec.value is None for rec in kept)
    if len(kept) == len(records) and (batch.has_delete_horizon or not has_tombstone):
        return batch.view()
    if not kept:
        if batch.producer_id >= 0 and last_offsets.get(batch.producer_id) == batch.last_offset:
            return _rebuild(batch, [], None, stats)  # keep the producer's last sequence
        return None
    new_horizon = batch.delete_horizon_ms if batch.has_delete_horizon else (horizon if has_tombstone else None)
    return _rebuild(batch, kept, new_horizon, stats)


def _rebuild(batch: RecordBatch, records, horizon, stats: CleanerStats) -> bytes:
    stats.batches_rebuilt += 1
    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    base_ts = batch.base_timestamp if not batch.has_delete_horizon else None
    if records and not log_append:
        base_ts = min(rec.timestamp for rec in records)
    return build_batch(
        records, base_offset=batch.base_offset, compression_type=batch.compression,
        timestamp_type=batch.timestamp_type, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        transactional=batch.is_transactional, control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch,
        base_timestamp=base_ts if base_ts is not None else NO_TIMESTAMP,
        max_timestamp=batch.max_timestamp if (log_append or not records) else None,
        delete_horizon_ms=horizon, last_offset_delta=batch.last_offset_delta)


def swap_files(cleaned: LogSegment, absorbed: list[LogSegment]) -> None:
    """Commit a cleaned segment's files: `.cleaned` -> `.swap` (the log file first), delete the
    `absorbed` segments (the rest of its group, whose data it holds now), then `.swap` -> live
    names (see segment.finish_swap, which start-up reuses)."""
    prefix = os.path.join(cleaned.directory, filename_prefix(cleaned.base_offset))
    cleaned.close()
    for stem in SEGMENT_SUFFIXES:  # LOG_SUFFIX comes first
        if os.path.exists(prefix + stem + CLEANED_SUFFIX):
            os.replace(prefix + stem + CLEANED_SUFFIX, prefix + stem + SWAP_SUFFIX)
    fsync_dir(cleaned.directory)
    for segment in absorbed:
        for path in segment.paths():
            if os.path.exists(path):
                os.remove(path)
    finish_swap(cleaned.directory, cleaned.base_offset)


def drop_absorbed(directory: str, base_offset: int, handles) -> None:
    """After start-up finished an interrupted swap at `base_offset`: remove what is left of the
    segments its group absorbed (those starting inside the swapped segment's offsets), so no
    offset is held twice."""
    swapped = LogSegment(directory, base_offset, handles)
    last = max((header.last_offset for _, header in swapped.iter_headers(0, swapped.size)), default=base_offset)
    swapped.release()
    for name in os.listdir(directory):
        stem = name.split(".")[0]
        if stem.isdigit() and base_offset < int(stem) <= last and \
                any(name == stem + suffix for suffix in SEGMENT_SUFFIXES):
            os.remove(os.path.join(directory, name))
    fsync_dir(directory)
