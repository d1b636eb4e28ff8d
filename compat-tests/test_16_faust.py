"""Scenario 16: a Faust worker (faust-streaming, aiokafka inside) counting per key into changelog tables.

A real ``faust worker`` process creates its topics itself (the source topic, declared internal with two
partitions and a retention; a compacted changelog per table, compact+delete with the window's expiry
for a windowed one; its leader-election topic), and an agent counts each key into a Table and a
tumbling-window Table. The worker is stopped (SIGTERM) and a new one starts on an empty data directory:
with the in-memory store, every count it continues from must come back from the changelog, so the
changelog holds 1, 2, 3... per key with no restart at 1 and no repeat.
Words are sent only once a worker is ready, and the app starts at the latest offset: Faust resumes
fetching while it restores its tables, before it seeks to the committed offsets, so words already waiting
at start-up may be read from the reset position and counted twice (3 runs in 4 on Apache Kafka 3.9, half on
Odradek; faust-streaming/faust#216 is the same race on its table-less path).
Skips unless faust is importable (``pip install faust-streaming``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("faust", reason="needs faust-streaming: pip install faust-streaming")

from odradek_compat.brokers import terminate  # noqa: E402
from odradek_compat.checks import wait_until  # noqa: E402
from odradek_compat.records import Rec  # noqa: E402

KEYS = [f"word-{i}" for i in range(5)]
PARTITIONS = 2

APP = textwrap.dedent("""
    import os
    from datetime import timedelta

    import faust

    env = os.environ
    app = faust.App(env["FAUST_APP_ID"], broker="kafka://" + env["FAUST_BOOTSTRAP"], store="memory://",
                    datadir=env["FAUST_DATA_DIR"], topic_partitions=2, topic_replication_factor=1,
                    broker_session_timeout=6, consumer_auto_offset_reset="latest")
    words = app.topic(env["FAUST_INPUT"], key_type=str, value_serializer="json", partitions=2,
                      internal=True, retention=timedelta(hours=1))
    counts = app.Table("counts", default=int, partitions=2)
    hourly = app.Table("hourly", default=int, partitions=2).tumbling(3600, expires=timedelta(hours=2))

    @app.agent(words)
    async def count(stream):
        async for word, _ in stream.items():
            counts[word] += 1
            hourly[word] += 1

    if __name__ == "__main__":
        app.main()
""")


class Worker:
    """A `faust worker` process of the app in `directory`, logging to `<name>.log` there."""

    def __init__(self, directory, name, env):
        self.log_path = directory / f"{name}.log"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "app.py", "worker", "--loglevel=info", "--without-web"], cwd=directory,
                stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, **env, "FAUST_DATA_DIR": str(directory / name)})

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        ready = wait_until("worker ready", self.log, lambda text: "[^Worker]: Ready" in text, 45, pause=0.2)
        assert "[^Worker]: Ready" in ready, ready[-3000:]

    def stop(self) -> int:
        return terminate(self.process, 20)


@pytest.fixture
def faust_app(helper, names, tmp_path):
    (tmp_path / "app.py").write_text(APP)
    app_id = names("faust")
    env = {"FAUST_APP_ID": app_id, "FAUST_BOOTSTRAP": helper.bootstrap, "FAUST_INPUT": names("words")}
    workers: list[Worker] = []

    def start(name):
        workers.append(Worker(tmp_path, name, env))
        return workers[-1]
    yield app_id, env["FAUST_INPUT"], start
    for worker in workers:
        worker.stop()


def changelog(helper, topic) -> list[tuple]:
    return [(json.loads(r.key), json.loads(r.value)) for r in helper.consume(topic, timeout=10)]


@pytest.mark.timeout(120)
def test_faust_table_recovers_from_changelog(faust_app, helper):
    app_id, words, start = faust_app
    counts_log, hourly_log = f"{app_id}-counts-changelog", f"{app_id}-hourly-changelog"
    sent: list[str] = []

    def send(count):
        batch = [KEYS[n % len(KEYS)] for n in range(len(sent), len(sent) + count)]
        deliveries = helper.produce(words, [Rec(w.encode(), json.dumps({"n": i}).encode())
                                            for i, w in enumerate(batch, len(sent))])
        assert not [d.error for d in deliveries if d.error]
        sent.extend(batch)

    def processed_and_committed():
        """Waits until the counts changelog has a record per word sent and the group committed them all."""
        wait_until("changelog complete", lambda: changelog(helper, counts_log),
                   lambda records: len(records) >= len(sent), 30, pause=0.3)
        ends = helper.list_offsets(words, range(PARTITIONS))
        want = {(words, p): ends[p][1] for p in range(PARTITIONS)}
        got = wait_until("offsets committed", lambda: helper.group_offsets(app_id),
                         lambda offsets: {k: v for k, v in offsets.items() if k[0] == words} == want, 30, pause=0.3)
        assert {k: v for k, v in got.items() if k[0] == words} == want

    first = start("first")
    first.wait_ready()
    internal = [words, counts_log, hourly_log, f"{app_id}-__assignor-__leader"]
    wait_until("topics created", lambda: [t for t in internal if t in helper.admin.list_topics(timeout=10).topics],
               lambda found: len(found) == len(internal), 30, pause=0.2)
    send(40)
    processed_and_committed()
    assert first.stop() == 0, first.log()[-3000:]

    second = start("second")   # nothing on disk: the tables come back from their changelogs
    second.wait_ready()
    send(40)
    processed_and_committed()
    assert second.stop() == 0, second.log()[-3000:]

    per_word: dict[str, list[int]] = {}
    for word, value in changelog(helper, counts_log):
        per_word.setdefault(word, []).append(value)
    assert per_word == {w: list(range(1, sent.count(w) + 1)) for w in KEYS}, json.dumps(per_word)
    latest_window = {}
    for (word, _window), value in changelog(helper, hourly_log):   # key: [word, [start, end]]
        latest_window[word] = value
    assert latest_window == {w: sent.count(w) for w in KEYS}

    assert all(helper.partition_count(t) == PARTITIONS for t in (words, counts_log, hourly_log))
    configs = {t: helper.describe_configs(t) for t in (words, counts_log, hourly_log)}
    assert (configs[words]["cleanup.policy"], configs[words]["retention.ms"]) == ("delete", "3600000")
    assert configs[counts_log]["cleanup.policy"] == "compact"
    assert (configs[hourly_log]["cleanup.policy"], configs[hourly_log]["retention.ms"]) == ("compact,delete",
                                                                                            "7200000")
    for worker in (first, second):
        assert "Traceback" not in worker.log(), worker.log()[-3000:]
