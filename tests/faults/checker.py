"""Checkers: from a trial's client history and what a reader found afterwards, what went wrong.

`check_producer(history, read)` for workload 1 (idempotent acks=all producers):
- lost: acknowledged (``ok``) values missing from the log;
- duplicated: acknowledged values present more than once (values of unknown outcome present more
  than once are counted apart, as `duplicated_unacknowledged`: see below);
- resent: of those, the ones whose copies were each written in another epoch of the same producer
  id, when the trial's `sessions` (log_files.producer_sessions) are given. The client sent them
  again after bumping its epoch: a new idempotence session, which no broker can deduplicate against
  the old one (librdkafka does this, confluentinc/librdkafka#4953). Reported, and not counted in
  `duplicated`: a broker's own duplicate has two copies in one producer epoch;
- reordered: acknowledged values of one partition whose log order differs from their produce order
  (counted as the values out of place against the longest in-order run, so one swap counts one;
  a value's first copy is where it counts, later copies are duplicates);
- phantom: values in the log that no client ever sent;
- wrong_offset: acknowledged values found at another offset than the one acknowledged (when the
  acknowledgement carried one);
- unstable: records a consumer saw while the trial ran (``seen``) that are no longer at that offset
  in the final read: a broker only shows committed records, and those are never taken back;
- unavailability windows: stretches of at least `WINDOW_S` seconds while writes were outstanding and
  none was acknowledged.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter, defaultdict

WINDOW_S = 2.0


def load(path: str) -> list[dict]:
    events = []
    try:
        with open(path) as handle:
            for line in handle:
                line = line.strip()
                if line:
                    try:
                        events.append(json.loads(line))
                    except ValueError:          # a line cut short by a kill
                        pass
    except FileNotFoundError:
        pass
    return events


def _sequence(value: str) -> int:
    return int(value.rsplit("-", 1)[1])


def unavailability(events: list[dict], window: float = WINDOW_S) -> list[tuple[float, float]]:
    """(start, length) of each gap of at least `window` s between acknowledgements during which
    some write was outstanding, relative to the first invocation. Counted from the first
    acknowledgement (the nemesis strikes only then): the wait for it is the client's start-up (the
    JVM's takes 3-7 s on a loaded machine), not the cluster being unavailable."""
    invokes = [e["t"] for e in events if e.get("type") == "invoke"]
    if not invokes:
        return []
    start = invokes[0]
    last_invoke = invokes[-1]
    acks = sorted(e["t"] for e in events if e.get("type") == "ok")
    marks = [t for t in acks if t <= last_invoke] or [start]
    marks.append(last_invoke)
    gaps = []
    for before, after in zip(marks, marks[1:]):
        if after - before >= window:
            gaps.append((round(before - start, 2), round(after - before, 2)))
    return gaps


def longest_increasing(values: list[int]) -> int:
    tails: list[int] = []
    for value in values:
        at = bisect.bisect_left(tails, value)
        if at == len(tails):
            tails.append(value)
        else:
            tails[at] = value
    return len(tails)


def check_producer(history: list[dict], read: list[dict], sessions: dict | None = None) -> dict:
    sent = {e["v"] for e in history if e.get("type") == "invoke"}
    acked = {e["v"]: e for e in history if e.get("type") == "ok"}
    failed = {e["v"] for e in history if e.get("type") == "fail"}
    records = [e for e in read if "v" in e]
    complete = bool(read) and bool(read[-1].get("complete"))
    counts = Counter(e["v"] for e in records)
    copies = defaultdict(list)
    for e in records:
        copies[e["v"]].append((e["p"], e["offset"]))
    where = {v: places[0] for v, places in copies.items()}
    # without a complete read nothing can be called lost: the trial counts as unrecovered instead
    lost = sorted(v for v in acked if v not in counts) if complete else []
    twice = sorted(v for v, n in counts.items() if n > 1 and v in acked)
    resent = [v for v in twice if _resent_in_new_epochs(copies[v], sessions)]
    duplicated = sorted(set(twice) - set(resent))
    # Written more than once although never acknowledged: librdkafka re-sends unacknowledged
    # records under a new producer epoch when some time out (each epoch is a fresh idempotence
    # session the broker cannot deduplicate across). Reported, outside the acks=all guarantee.
    duplicated_unacked = sorted(v for v, n in counts.items() if n > 1 and v not in acked)
    phantom = sorted(v for v in counts if v not in sent)
    resurrected = sorted(v for v in counts if v in failed)      # a definite failure that happened
    # librdkafka acks a batch implicitly, without its offset, when a later batch of the same
    # producer succeeded after this one's request failed (the broker must have it then)
    wrong_offset = sorted(v for v, e in acked.items() if v in where and e.get("offset") is not None
                          and (e["p"], e["offset"]) not in copies[v])
    reordered = 0
    by_partition = defaultdict(list)
    for e in records:
        if e["v"] in acked and where[e["v"]] == (e["p"], e["offset"]):
            by_partition[e["p"]].append(_sequence(e["v"]))
    for sequences in by_partition.values():
        reordered += len(sequences) - longest_increasing(sequences)
    # what a consumer saw while the nemesis struck must still be there, at the same offset
    final = {(e["p"], e["offset"]): e["v"] for e in records}
    unstable = sorted({(e["p"], e["offset"], e["v"]) for e in history if e.get("type") == "seen"
                       and final.get((e["p"], e["offset"])) != e["v"]}) if complete else []
    windows = unavailability(history)
    return {
        "acknowledged": len(acked), "sent": len(sent), "unstable": len(unstable),
        "unknown": sum(1 for e in history if e.get("type") == "info"),
        "lost": len(lost), "duplicated": len(duplicated), "resent": len(resent),
        "reordered": reordered,
        "phantom": len(phantom) + len(resurrected), "wrong_offset": len(wrong_offset),
        "read_complete": complete, "duplicated_unacknowledged": len(duplicated_unacked),
        "windows": len(windows), "longest_window_s": max((w[1] for w in windows), default=0.0),
        "examples": {"lost": lost[:5], "duplicated": duplicated[:5], "resent": resent[:5],
                     "phantom": phantom[:5],
                     "resurrected": resurrected[:5], "wrong_offset": wrong_offset[:5],
                     "duplicated_unacknowledged": duplicated_unacked[:5],
                     "unstable": unstable[:5]},
    }


def _resent_in_new_epochs(places: list[tuple[int, int]], sessions: dict | None) -> bool:
    """Whether every copy of a value was written by one producer id, each in an epoch of its own."""
    if not sessions:
        return False
    writers = [sessions.get(place) for place in places]
    if None in writers or len({producer_id for producer_id, _ in writers}) != 1:
        return False
    return len({epoch for _, epoch in writers}) == len(writers)


def ok(result: dict) -> bool:
    return result["read_complete"] and not (result["lost"] or result["duplicated"]
                                            or result["reordered"] or result["phantom"]
                                            or result["wrong_offset"]
                                            or result.get("diverged")
                                            or result.get("unstable")
                                            or result.get("violations"))


def delivery_errors(history: list[dict]) -> list[str]:
    """The errors a producer's application saw: each record it was told failed or may have
    failed, then each fatal error. A client retries retriable errors itself; one that reaches the
    application was not retriable, or outlasted every retry."""
    errors = [str(e.get("error")) for e in history if e.get("type") in ("fail", "info")]
    return errors + [str(f) for e in history if e.get("type") == "end" for f in e.get("fatal", [])]


def check_transactions(history: list[dict], read: list[dict]) -> dict:
    """Workload 2 (consume-transform-produce in transactions, read_committed). Output values are
    ``<input>@<transaction>``. Lost: inputs of a committed (``ok``) transaction missing from the
    output; duplicated: inputs in the output more than once; phantom: output records of no
    transaction, or of an aborted one (``fail``: visible to read_committed although aborted);
    reordered: one input partition's records out of order in the output; unprocessed: inputs never
    in the output although the transformer said it finished."""
    inputs_of = {e["txn"]: set(e["inputs"]) for e in history if e.get("type") == "invoke"}
    committed = {e["txn"] for e in history if e.get("type") == "ok"}
    aborted = {e["txn"] for e in history if e.get("type") == "fail"}
    end = next((e for e in history if e.get("type") == "end"), {})
    seeded = next((e["count"] for e in history if e.get("type") == "seeded"), 0)
    records = [e for e in read if "v" in e]
    complete = bool(read) and bool(read[-1].get("complete"))
    counts: Counter = Counter()
    phantom, aborted_visible = [], []
    by_partition = defaultdict(list)
    for e in records:
        value, _, txn = e["v"].rpartition("@")
        txn = int(txn) if txn.isdigit() else -1
        if txn not in inputs_of or value not in inputs_of[txn]:
            phantom.append(e["v"])
            continue
        if txn in aborted:
            aborted_visible.append(e["v"])
        counts[value] += 1
        by_partition[e["p"]].append(_sequence(value))
    acknowledged = set().union(*(inputs_of[t] for t in committed)) if committed else set()
    lost = sorted(v for v in acknowledged if not counts[v]) if complete else []
    duplicated = sorted(v for v, n in counts.items() if n > 1)
    # inputs of no committed transaction and not in the output, although every offset was committed
    unprocessed = seeded - len(set(counts) | acknowledged) if end.get("done") else 0
    reordered = sum(len(s) - longest_increasing(s) for s in by_partition.values())
    windows = unavailability([{"t": e["t"], "type": e["type"]} for e in history
                              if e.get("type") in ("invoke", "ok")])
    return {
        "acknowledged": len(acknowledged), "sent": seeded,
        "unknown": sum(1 for e in history if e.get("type") == "info"),
        "lost": len(lost) + max(unprocessed, 0), "duplicated": len(duplicated),
        "reordered": reordered, "phantom": len(phantom) + len(aborted_visible),
        "wrong_offset": 0, "read_complete": complete and bool(end.get("done")),
        "transactions": len(inputs_of), "committed": len(committed), "aborted": len(aborted),
        "windows": len(windows), "longest_window_s": max((w[1] for w in windows), default=0.0),
        "examples": {"lost": lost[:5], "duplicated": duplicated[:5], "phantom": phantom[:5],
                     "aborted_visible": aborted_visible[:5]},
    }


def check_group(history: list[dict], read: list[dict] | None = None) -> dict:
    """Workload 3 (a consumer group under membership churn, synchronous commits).
    Backwards (reported as `reordered`): a partition's committed offset, as the watcher observed it
    over time, went down; or a commit succeeded with a lower offset than a commit that had already
    succeeded before it was asked for. Skipped (reported as `lost`): records below the final
    committed offset that no member ever consumed."""
    observed = [e for e in history if e.get("type") == "observed"]
    backwards = []
    highest: dict[str, int] = {}
    for e in observed:
        for p, offset in e["offsets"].items():
            if offset >= 0 and offset < highest.get(p, -1):
                backwards.append(("observed", p, highest[p], offset, e["t"]))
            highest[p] = max(highest.get(p, -1), offset)
    invoked_at: dict[str, float] = {}
    completed = []        # (completion time, invocation time, partition, offset)
    for e in history:
        if e.get("type") == "invoke" and "member" in e:
            invoked_at[e["member"]] = e["t"]
        elif e.get("type") == "ok" and "member" in e:
            for p, offset in e["offsets"].items():
                completed.append((e["t"], invoked_at.get(e["member"], e["t"]), p, offset))
    best_before: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for done_at, _, p, offset in sorted(completed):
        best_before[p].append((done_at, max(offset, best_before[p][-1][1] if best_before[p] else -1)))
    for done_at, asked_at, p, offset in completed:
        earlier = [best for when, best in best_before[p] if when < asked_at]
        if earlier and offset < earlier[-1]:
            backwards.append(("commit", p, earlier[-1], offset, asked_at))
    consumed = defaultdict(set)
    for e in history:
        if e.get("type") == "consumed":
            consumed[str(e["p"])].add(e["offset"])
    final = {p: o for p, o in highest.items()}
    skipped = sorted((p, o) for p, end in final.items() for o in range(max(end, 0))
                     if o not in consumed[p])
    end = next((e for e in history if e.get("type") == "end"), {})
    commits = sum(1 for e in history if e.get("type") == "ok" and "member" in e)
    windows = unavailability([{"t": e["t"], "type": e["type"]} for e in history
                              if e.get("type") in ("invoke", "ok") and "member" in e])
    reconsumed = sum(1 for e in history if e.get("type") == "consumed") - \
        sum(len(v) for v in consumed.values())
    return {
        "acknowledged": commits, "sent": next((e["count"] for e in history
                                               if e.get("type") == "seeded"), 0),
        "unknown": sum(1 for e in history if e.get("type") == "info" and "member" in e),
        "lost": len(skipped), "duplicated": 0, "reordered": len(backwards), "phantom": 0,
        "wrong_offset": 0, "read_complete": bool(end.get("done")), "reconsumed": reconsumed,
        "windows": len(windows), "longest_window_s": max((w[1] for w in windows), default=0.0),
        "examples": {"skipped": skipped[:5], "backwards": backwards[:5]},
    }
