"""The fault suite's CI slice: one trial of every nemesis on real 3-node clusters in network
namespaces (two labs at once, the shortest fault spans), plus one of slow fsync with the Java
producer (the full run is `python -m tests.faults.run`, see README), the checker's own tests (it
must see lost, duplicated, reordered and phantom records when they are there), the runner's and the
slow-fsync shim's."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.faults import checker, java_client, labs, netlab, slowdisk
from tests.faults.nemesis import NEMESES
from tests.faults.run import _keep_logs, ensure_tools, run_trial
from tests.faults.run import main as run_main

# -- the checker -------------------------------------------------------------------------------------
def _history(*events):
    out, t = [], 0.0
    for kind, value, *rest in events:
        t += 0.1
        event = {"t": t, "type": kind, "p": int(value.split("-")[0]), "v": value}
        if rest:
            event["offset"] = rest[0]
        out.append(event)
    return out


def _read(*records, complete=True):
    return [{"p": int(v.split("-")[0]), "offset": o, "v": v} for v, o in records] + \
        [{"complete": complete}]


def test_checker_passes_a_clean_history():
    history = _history(("invoke", "0-0"), ("invoke", "0-1"), ("ok", "0-0", 0), ("ok", "0-1", 1))
    result = checker.check_producer(history, _read(("0-0", 0), ("0-1", 1)))
    assert checker.ok(result) and result["acknowledged"] == 2


def test_checker_finds_lost_duplicated_reordered_and_phantom_records():
    history = _history(("invoke", "0-0"), ("invoke", "0-1"), ("invoke", "0-2"), ("invoke", "1-0"),
                       ("ok", "0-0", 0), ("ok", "0-1", 1), ("ok", "0-2", 2), ("ok", "1-0", 0))
    lost = checker.check_producer(history, _read(("0-0", 0), ("0-1", 1), ("0-2", 2)))
    assert lost["lost"] == 1 and lost["examples"]["lost"] == ["1-0"] and not checker.ok(lost)
    duplicated = checker.check_producer(history, _read(("0-0", 0), ("0-1", 1), ("0-1", 2),
                                                       ("0-2", 3), ("1-0", 0)))
    assert duplicated["duplicated"] == 1 and not checker.ok(duplicated)
    reordered = checker.check_producer(history, _read(("0-0", 0), ("0-2", 1), ("0-1", 2),
                                                      ("1-0", 0)))
    assert reordered["reordered"] == 1 and not checker.ok(reordered)
    phantom = checker.check_producer(history, _read(("0-0", 0), ("0-1", 1), ("0-2", 2),
                                                    ("0-9", 3), ("1-0", 0)))
    assert phantom["phantom"] == 1 and not checker.ok(phantom)


def test_checker_finds_records_a_consumer_saw_that_the_log_took_back():
    history = _history(("invoke", "0-0"), ("invoke", "0-1"), ("ok", "0-0", 0), ("info", "0-1"))
    history += [{"t": 1.0, "type": "seen", "p": 0, "offset": 0, "v": "0-0"},
                {"t": 1.1, "type": "seen", "p": 0, "offset": 1, "v": "0-1"}]
    assert checker.ok(checker.check_producer(history, _read(("0-0", 0), ("0-1", 1))))
    gone = checker.check_producer(history, _read(("0-0", 0)))
    assert gone["unstable"] == 1 and gone["examples"]["unstable"] == [(0, 1, "0-1")]
    assert not checker.ok(gone)
    moved = checker.check_producer(history, _read(("0-0", 0), ("0-0", 1)))
    assert moved["unstable"] == 1 and not checker.ok(moved)


def test_checker_accepts_unknown_outcomes_either_way_but_not_an_incomplete_read():
    history = _history(("invoke", "0-0"), ("invoke", "0-1"), ("ok", "0-0", 0), ("info", "0-1"))
    assert checker.ok(checker.check_producer(history, _read(("0-0", 0))))
    assert checker.ok(checker.check_producer(history, _read(("0-0", 0), ("0-1", 1))))
    twice = checker.check_producer(history, _read(("0-0", 0), ("0-1", 1), ("0-1", 2)))
    assert checker.ok(twice) and twice["duplicated_unacknowledged"] == 1
    assert not checker.ok(checker.check_producer(history, _read(("0-0", 0), complete=False)))


def test_delivery_errors_and_a_nemesis_violation_are_seen():
    history = _history(("invoke", "0-0"), ("invoke", "0-1"), ("ok", "0-0", 0), ("info", "0-1"))
    history[-1]["error"] = "_MSG_TIMED_OUT"
    history.append({"t": 9.0, "type": "end", "fatal": ["_FENCED"]})
    assert checker.delivery_errors(history) == ["_MSG_TIMED_OUT", "_FENCED"]
    assert checker.delivery_errors(history[:3]) == []
    result = checker.check_producer(history[:3], _read(("0-0", 0)))
    assert checker.ok(result)
    assert not checker.ok({**result, "violations": ["node 3 exited still leading ['t-0']"]})


def test_copies_in_new_producer_epochs_are_resent_not_duplicated(tmp_path):
    """The trial-368 shape: a partition's batches 0-1 and 0-2 of epoch 0 written again in epoch 1
    (sequences from 0) after the client bumped its epoch. Read from real segment bytes."""
    from protocol.records import SimpleRecord, build_batch
    from tests.faults.log_files import producer_sessions

    def batch(values, offset, epoch, sequence):
        return build_batch([SimpleRecord(value=v.encode()) for v in values], base_offset=offset,
                           producer_id=45003, producer_epoch=epoch, base_sequence=sequence)

    for node, segment in (("node-1", batch(["0-0"], 0, 0, 0) + batch(["0-1", "0-2"], 1, 0, 1)
                           + batch(["0-1", "0-2"], 3, 1, 0) + batch(["0-3"], 5, 1, 2)),
                          ("node-2", batch(["0-0"], 0, 0, 0))):      # a shorter copy: not used
        os.makedirs(tmp_path / node / "t-0")
        (tmp_path / node / "t-0" / "00000000000000000000.log").write_bytes(segment)
    (tmp_path / "node-1" / "t-x").mkdir()                            # not a partition
    sessions = producer_sessions([str(tmp_path / "node-2"), str(tmp_path / "node-1")], "t")
    assert sessions[(0, 2)] == (45003, 0) and sessions[(0, 4)] == (45003, 1) and len(sessions) == 6

    history = _history(*[("invoke", f"0-{i}") for i in range(4)],
                       *[("ok", f"0-{i}") for i in range(4)])
    read = _read(("0-0", 0), ("0-1", 1), ("0-2", 2), ("0-1", 3), ("0-2", 4), ("0-3", 5))
    result = checker.check_producer(history, read, sessions)
    assert result["resent"] == 2 and result["duplicated"] == 0 and result["reordered"] == 0
    assert checker.ok(result)
    # without the sessions, or with both copies in one epoch, they are the broker's duplicates
    assert checker.check_producer(history, read)["duplicated"] == 2
    one_epoch = {**sessions, (0, 3): (45003, 0)}
    result = checker.check_producer(history, read, one_epoch)
    assert result["duplicated"] == 1 and result["resent"] == 1 and not checker.ok(result)


def test_replica_divergence_compares_the_offsets_every_copy_holds(tmp_path):
    """Copies that agree (one a fetch behind, another leader's epoch stamped) pass; a node that kept
    a batch its leader replaced is reported at that batch's offset; other topics are not read."""
    from protocol.records import SimpleRecord, build_batch
    from tests.faults.log_files import replica_divergence

    def batch(value, offset, epoch=0):
        return build_batch([SimpleRecord(value=value.encode())], base_offset=offset,
                           partition_leader_epoch=epoch)

    common = batch("a", 0) + batch("b", 1)
    copies = {"node-1": {"t-0": common + batch("c", 2, 1), "t-1": batch("x", 0),
                         "t-in-0": batch("y", 0)},
              "node-2": {"t-0": common + batch("c", 2, 2) + batch("d", 3), "t-1": batch("x", 0)},
              "node-3": {"t-0": common, "t-1": batch("stale", 0)}}
    for node, partitions in copies.items():
        for name, segment in partitions.items():
            os.makedirs(tmp_path / node / name)
            (tmp_path / node / name / "00000000000000000000.log").write_bytes(segment)
    dirs = [str(tmp_path / node) for node in copies]
    assert replica_divergence(dirs, "t") == {1: 0}
    assert replica_divergence(dirs[:2], "t") == {}
    (tmp_path / "node-2" / "t-0" / "00000000000000000000.log").write_bytes(
        common + batch("other", 2) + batch("d", 3))
    assert replica_divergence(dirs[:2], "t") == {0: 2}


def test_torn_tails_damage_only_the_last_batch_of_each_active_segment(tmp_path):
    """Each variant on real segment bytes: `cut` ends the file inside the last batch, `garbage` and
    `zeros` add bytes after it; older segments, the metadata log and batch-less files are left."""
    import random

    from protocol.records import SimpleRecord, build_batch
    from tests.faults import torn_writes

    batches = [build_batch([SimpleRecord(value=b"v" * 50)], base_offset=i) for i in range(3)]
    whole = b"".join(batches)
    rng = random.Random(5)
    for variant in torn_writes.VARIANTS:
        for _ in range(20):
            segment = tmp_path / f"{variant}.log"
            segment.write_bytes(whole)
            assert torn_writes.tear(str(segment), variant, rng)
            torn = segment.read_bytes()
            if variant == "cut":
                assert len(whole) - len(batches[2]) < len(torn) < len(whole)
                assert whole.startswith(torn)
            else:
                assert torn.startswith(whole) and len(torn) > len(whole)
                assert variant == "garbage" or not torn[len(whole):].strip(b"\0")
    (tmp_path / "empty.log").write_bytes(b"")
    assert not torn_writes.tear(str(tmp_path / "empty.log"), "cut", rng)

    node = tmp_path / "node"
    for name, files in {"t-0": {"00000000000000000000.log": whole[:len(batches[0])],
                                "00000000000000000001.log": whole[len(batches[0]):]},
                        "metadata": {"00000000000000000000.log": whole},
                        "__cluster_metadata-0": {"00000000000000000000.log": whole}}.items():
        (node / name).mkdir(parents=True)
        for file, data in files.items():
            (node / name / file).write_bytes(data)
    assert sum(torn_writes.tear_tails(str(node), rng).values()) == 1
    assert (node / "t-0" / "00000000000000000000.log").read_bytes() == whole[:len(batches[0])]
    assert (node / "t-0" / "00000000000000000001.log").read_bytes() != whole[len(batches[0]):]
    assert all((node / name / "00000000000000000000.log").read_bytes() == whole
               for name in ("metadata", "__cluster_metadata-0"))


def test_unavailability_windows_are_gaps_between_acknowledgements():
    events = [{"t": 0.0, "type": "invoke"}, {"t": 0.5, "type": "ok"}, {"t": 4.0, "type": "ok"},
              {"t": 4.5, "type": "invoke"}]
    assert checker.unavailability(events) == [(0.5, 3.5)]
    slow_start = [{"t": 0.0, "type": "invoke"}, {"t": 5.0, "type": "ok"}, {"t": 5.5, "type": "ok"},
                  {"t": 6.0, "type": "invoke"}]
    assert checker.unavailability(slow_start) == []             # the client's start-up
    never = [{"t": 0.0, "type": "invoke"}, {"t": 3.0, "type": "invoke"}]
    assert checker.unavailability(never) == [(0.0, 3.0)]


def test_transaction_checker_finds_aborted_records_and_duplicated_inputs():
    history = [{"t": 0.1, "type": "seeded", "count": 3},
               {"t": 0.2, "type": "invoke", "txn": 1, "inputs": ["0-0", "0-1"]},
               {"t": 0.3, "type": "fail", "txn": 1},
               {"t": 0.4, "type": "invoke", "txn": 2, "inputs": ["0-0", "0-1", "0-2"]},
               {"t": 0.5, "type": "ok", "txn": 2}, {"t": 0.6, "type": "end", "done": True}]
    clean = _read(("0-0@2", 0), ("0-1@2", 1), ("0-2@2", 2))
    assert checker.ok(checker.check_transactions(history, clean))
    aborted = _read(("0-0@1", 0), ("0-0@2", 1), ("0-1@2", 2), ("0-2@2", 3))
    result = checker.check_transactions(history, aborted)
    assert result["phantom"] == 1 and result["duplicated"] == 1 and not checker.ok(result)
    lost = checker.check_transactions(history, _read(("0-0@2", 0), ("0-2@2", 2)))
    assert lost["lost"] == 1 and not checker.ok(lost)


def test_group_checker_finds_offsets_going_backwards_and_skipped_records():
    consumed = [{"t": 0.1, "type": "consumed", "member": "m1", "p": 0, "offset": o} for o in range(4)]
    commits = [{"t": 0.2, "type": "invoke", "member": "m1", "offsets": {"0": 4}},
               {"t": 0.3, "type": "ok", "member": "m1", "offsets": {"0": 4}}]
    clean = consumed + commits + [{"t": 0.4, "type": "observed", "offsets": {"0": 4}},
                                  {"t": 0.5, "type": "end", "done": True}]
    assert checker.ok(checker.check_group(clean))
    regressed = clean + [{"t": 0.6, "type": "observed", "offsets": {"0": 2}}]
    assert checker.check_group(regressed)["reordered"] == 1
    stale = clean + [{"t": 0.6, "type": "invoke", "member": "m2", "offsets": {"0": 3}},
                     {"t": 0.7, "type": "ok", "member": "m2", "offsets": {"0": 3}}]
    assert checker.check_group(stale)["reordered"] == 1
    skipped = consumed[:2] + commits + [{"t": 0.4, "type": "observed", "offsets": {"0": 4}},
                                        {"t": 0.5, "type": "end", "done": True}]
    result = checker.check_group(skipped)
    assert result["lost"] == 2 and not checker.ok(result)


# -- the runner: planning, resuming, summarizing, labs side by side ---------------------------------
def test_a_resumed_run_plans_only_the_trials_each_kind_still_lacks():
    kinds = [("producer", "librdkafka", "kill-leader"), ("producer", "librdkafka", "disk-full")]
    assert labs.plan(kinds, 2, []) == [kinds[0], kinds[1], kinds[0], kinds[1]]
    earlier = [{"nemesis": "kill-leader", "ok": True}, {"nemesis": "kill-leader", "ok": False},
               {"nemesis": "disk-full", "workload": "group", "ok": True}]     # another kind
    assert labs.plan(kinds, 3, earlier) == [kinds[1], kinds[1], kinds[0], kinds[1]]


def test_summarize_reads_results_files_and_skips_a_line_cut_short(tmp_path, capsys):
    row = {"nemesis": "kill-leader", "ok": True, "read_complete": True, "acknowledged": 5,
           "lost": 0, "duplicated": 0, "reordered": 0, "phantom": 0, "unknown": 1, "windows": 1,
           "longest_window_s": 2.5}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.jsonl").write_text(json.dumps(row) + "\n" + '{"nemesis": "ki')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.jsonl").write_text(json.dumps({**row, "acknowledged": 7}) + "\n")
    assert run_main(["--summarize", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if "kill-leader" in x][0]
    assert line.split()[3:6] == ["2", "12", "0"]          # trials, acknowledged, lost


def test_labs_of_one_process_have_their_own_names_and_subnets_and_a_sweep_spares_them():
    if netlab.available():
        pytest.skip(f"needs network namespaces: {netlab.available()}")
    with netlab.NetLab() as first, netlab.NetLab() as second:
        assert first.tag != second.tag and first.subnet != second.subnet
        hosts = [first.add_host("a"), second.add_host("a")]
        netlab.sweep_stale()
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                timeout=30).stdout
        assert all(host.netns in listed for host in hosts)
        ping = subprocess.run(hosts[1].exec_prefix() + ["ping", "-c1", "-W2", f"{second.subnet}.1"],
                              capture_output=True, timeout=30)
        assert ping.returncode == 0 or not shutil.which("ping")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            timeout=30).stdout
    assert not any(host.netns in listed for host in hosts)


# -- the slow-fsync shim ------------------------------------------------------------------------------
_TIMED_FSYNCS = """
import os, sys, time
with open(sys.argv[1], "wb") as handle:
    handle.write(b"x")
    began = time.monotonic()
    os.fsync(handle.fileno())
    os.fdatasync(handle.fileno())
    print(time.monotonic() - began)
"""


@pytest.mark.skipif(slowdisk.compiler() is None, reason="no C compiler")
def test_the_fsync_shim_delays_while_switched_on_and_not_otherwise(tmp_path):
    shim = slowdisk.SlowFsyncShim()
    try:
        control = str(tmp_path / "control")
        env = {**os.environ, "LD_PRELOAD": shim.library, slowdisk.CONTROL_ENV: control}

        def timed() -> float:
            done = subprocess.run([sys.executable, "-c", _TIMED_FSYNCS, str(tmp_path / "data")],
                                  env=env, capture_output=True, text=True, timeout=60, check=True)
            return float(done.stdout)
        assert timed() < 0.3 and slowdisk.hits(control) == 0        # no control file: no delay
        slowdisk.set_delay(control, 400, 500)
        assert timed() >= 0.8 and slowdisk.hits(control) == 2       # fsync and fdatasync
        slowdisk.set_delay(control, 0)
        assert timed() < 0.3 and slowdisk.hits(control) == 2
    finally:
        shim.close()
    assert not os.path.exists(shim.directory)


# -- the CI slice ------------------------------------------------------------------------------------
SLICE_LABS = 2          # labs at once: the machine is small and shared
SLICE_SEED = 14
JAVA_KIND = ("producer", "java", "slow-fsync")


def _selected_kinds(session) -> list[tuple[str, str, str]]:
    """The trials the selected tests of this module need (all of them in `bash tests/run`)."""
    kinds = []
    for item in session.items:
        if item.module.__name__ != __name__:
            continue
        if item.originalname == "test_acknowledged_writes_survive":
            kinds.append(("producer", "librdkafka", item.callspec.params["nemesis"]))
        elif item.originalname == "test_java_producer_under_slow_fsync":
            kinds.append(JAVA_KIND)
    return kinds


@pytest.fixture(scope="module")
def slice_results(request, tmp_path_factory):
    """One trial of every selected kind, run on SLICE_LABS labs at once, with the shortest fault
    spans; kind -> its result. The labs are closed when the run ends, on failure too."""
    problem = ensure_tools()
    if problem:
        pytest.skip(f"fault injection needs root and network namespaces: {problem}")
    kinds = _selected_kinds(request.session)
    if JAVA_KIND in kinds and java_client.missing():
        kinds.remove(JAVA_KIND)
    out = str(tmp_path_factory.mktemp("faults-slice"))
    run = labs.Run(out, kinds, 1, [], SLICE_SEED, labs=min(SLICE_LABS, len(kinds)), quick=True,
                   trial=functools.partial(run_trial, max_seconds=45), keep_logs=_keep_logs)
    results = run.go()
    if run.interrupted:             # the labs are closed; stop the session as Ctrl-C does
        raise KeyboardInterrupt
    assert len(results) == len(kinds), f"the run ended early: {results}"
    return {labs.key(result): result for result in results}, out


# what a nemesis raises when this machine lacks its tool (ensure_tools could not install it)
MISSING_TOOL = ("libfaketime is not installed", "the slow-fsync shim is not loaded")


def _skip_if_tool_missing(result: dict) -> None:
    for reason in MISSING_TOOL:
        if reason in result.get("error", ""):
            pytest.skip(reason)


def _explain(result: dict, out: str) -> str:
    """A failed trial: its result and the tail of each node's log it kept."""
    lines = [json.dumps(result)[:2000]]
    trial_dir = os.path.join(out, f"trial-{result['trial']}")
    for name in sorted(os.listdir(trial_dir)) if os.path.isdir(trial_dir) else []:
        if name.startswith("node-") and name.endswith(".log"):
            with open(os.path.join(trial_dir, name), errors="replace") as handle:
                lines += [f"--- {name}"] + handle.read().splitlines()[-15:]
    return "\n".join(lines)


@pytest.mark.parametrize("nemesis", list(NEMESES))
def test_acknowledged_writes_survive(slice_results, nemesis):
    """An idempotent acks=all producer under the nemesis: every acknowledged record is read back
    exactly once, in produce order, with nothing that was never sent."""
    results, out = slice_results
    result = results[("producer", "librdkafka", nemesis)]
    _skip_if_tool_missing(result)
    assert not result.get("unrecovered"), _explain(result, out)
    assert result["acknowledged"] > 0, _explain(result, out)
    assert checker.ok(result), _explain(result, out)


@pytest.mark.skipif(java_client.missing() is not None, reason=str(java_client.missing()))
def test_java_producer_under_slow_fsync(slice_results):
    """The official Java client's idempotent acks=all producer while a partition leader's fsyncs
    take 0.5-1.5 s each (fsync before acknowledging is on): nothing acknowledged lost, duplicated
    or reordered, and the fault really delayed fsyncs."""
    results, out = slice_results
    result = results[JAVA_KIND]
    _skip_if_tool_missing(result)
    assert not result.get("unrecovered"), _explain(result, out)
    assert result["client"] == "java" and result["acknowledged"] > 0, _explain(result, out)
    assert " 0 fsyncs delayed" not in result["fault"], _explain(result, out)
    assert checker.ok(result), _explain(result, out)
