"""broker.collector: a bulk open freezes without walking the whole heap; a bulk delete collects it."""

import gc

from broker import collector
from broker.collector import CollectorSteward


def _settle_with_recorded_collections(monkeypatch, note):
    generations = []
    monkeypatch.setattr(collector.gc, "collect", lambda generation=2: generations.append(generation) or 0)
    steward = CollectorSteward(bulk_partitions=10)
    note(steward)
    try:
        assert steward.settle()
    finally:
        gc.unfreeze()
    return generations


def test_after_a_bulk_open_only_the_young_generations_are_collected(monkeypatch):
    assert _settle_with_recorded_collections(monkeypatch, lambda s: s.note_opened(10)) == [1]


def test_after_a_bulk_delete_the_full_heap_is_collected(monkeypatch):
    assert _settle_with_recorded_collections(monkeypatch, lambda s: s.note_deleted(10)) == [2]


def test_nothing_happens_below_the_bulk_size(monkeypatch):
    steward = CollectorSteward(bulk_partitions=10)
    steward.note_opened(9)
    assert not steward.settle()


def test_a_long_bulk_open_may_settle_on_the_way_unless_deletions_are_pending():
    steward = CollectorSteward(bulk_partitions=10)
    steward.note_opened(10)
    assert steward.due_after_openings_alone
    steward.note_deleted(1)
    assert steward.due and not steward.due_after_openings_alone
