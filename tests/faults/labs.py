"""Running many fault trials on one or more labs at once, into one results file.

A `Run` plans the trials round robin over the kinds (workload, client, nemesis), minus what an
earlier run into the same directory already did (`--resume`), and hands them to N labs, each a
thread with a `FaultEnv` (its own cluster, bridge, subnet and namespaces) of its own. Results go to
OUT/results.jsonl as they come; the table is printed after each round. A lab whose cluster fails to
recover records the trial as unrecovered and builds a fresh cluster. Ctrl-C or SIGTERM closes every
lab at once (a trial cut short is not recorded, so `--resume` runs it again); every wait is bounded.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import threading
import time
from collections import Counter

from tests.faults.env import FaultEnv
from tests.faults.netlab import install_cleanup_hooks
from tests.faults.summary import RESULTS, format_table, key, summarize

JOIN_TIMEOUT_S = 60         # how long an interrupted run waits for its labs' threads


def plan(kinds: list[tuple[str, str, str]], trials: int, earlier: list[dict]):
    """The trials still to run, round robin (a run cut short has covered every kind alike): round
    i holds each kind that has fewer than i+1 trials in `earlier`."""
    done = Counter(key(result) for result in earlier)
    return [kind for round_ in range(trials) for kind in kinds if done[kind] <= round_]


class Run:
    def __init__(self, out: str, kinds, trials: int, earlier: list[dict], seed: int,
                 labs: int = 1, hours: float | None = None, quick: bool = False,
                 trial=None, keep_logs=None, broker: str = "odradek"):
        self.out = out
        self.kinds = kinds
        self.tasks = plan(kinds, trials, earlier)
        self.earlier = earlier
        self.seed = seed
        self.labs = labs
        self.deadline = time.monotonic() + hours * 3600 if hours else None
        self.quick = quick
        self.broker = broker            # what every lab's nodes run (FaultEnv's `broker`)
        self.trial, self.keep_logs = trial, keep_logs
        self.number = max((r.get("trial", 0) for r in earlier), default=0)
        self.results: list[dict] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.interrupted = False
        self.envs: dict[int, FaultEnv] = {}      # lab -> its running environment
        self.building: dict[int, FaultEnv] = {}  # lab -> the environment it is building

    def go(self) -> list[dict]:
        """Run every planned trial (or until the deadline or an interrupt); this run's results."""
        os.makedirs(self.out, exist_ok=True)
        install_cleanup_hooks()         # from the main thread: the labs are built in others
        root = tempfile.mkdtemp(prefix="odradek-faults-")
        threads = [threading.Thread(target=self._lab, args=(index, root), daemon=True,
                                    name=f"lab-{index}") for index in range(self.labs)]
        try:
            with open(os.path.join(self.out, RESULTS), "a") as self.sink:
                for thread in threads:
                    thread.start()
                while any(thread.is_alive() for thread in threads):
                    for thread in threads:
                        thread.join(0.5)        # short joins: signals reach the main thread
        except KeyboardInterrupt:       # Ctrl-C or SIGTERM: keep and show what was measured
            print("faults: interrupted", flush=True)
            self.interrupted = True
            self.stop.set()
            for env in list(self.envs.values()):
                env.close()                   # the labs' waits end soon after
            ends_by = time.monotonic() + JOIN_TIMEOUT_S
            for thread in threads:
                thread.join(max(0.0, ends_by - time.monotonic()))
        finally:
            self.stop.set()
            for env in list(self.building.values()) + list(self.envs.values()):
                env.close()                   # a lab thread that did not end in time
            shutil.rmtree(root, ignore_errors=True)
        return self.results

    def _next(self):
        """The next trial to run (its number and kind), or None when done."""
        with self.lock:
            if self.stop.is_set() or not self.tasks:
                return None
            if self.deadline and time.monotonic() > self.deadline:
                return None
            self.number += 1
            return self.number, self.tasks.pop(0)

    def _lab(self, index: int, root: str) -> None:
        # lab 0 draws as a serial run of the same seed does
        rng = random.Random(self.seed if index == 0 else f"{self.seed}-{index}")
        env = None
        built = 0
        try:
            while (task := self._next()) is not None:
                number, (workload, client_name, name) = task
                try:
                    if env is None:
                        built += 1
                        env_root = os.path.join(root, f"lab-{index}-env-{built}")
                        os.makedirs(env_root)
                        env = self.building[index] = FaultEnv(env_root, quick=self.quick,
                                                                 broker=self.broker)
                        env.__enter__()
                        self.envs[index] = self.building.pop(index)
                        if self.stop.is_set():
                            break
                    result = self.trial(env, name, number, rng, self.out, workload=workload,
                                        client_name=client_name)
                except Exception as error:      # noqa: BLE001 - recorded, then a fresh cluster
                    if self.stop.is_set():
                        break
                    result = {"trial": number, "nemesis": name, "workload": workload,
                              "client": client_name, "broker": self.broker,
                              "unrecovered": True, "ok": False,
                              "error": f"{type(error).__name__}: {error}"}
                    if env is not None:
                        if env.cluster is not None:
                            self.keep_logs(env, os.path.join(self.out, f"trial-{number}"))
                        env.close()
                    env = None
                if self.stop.is_set():          # cut short by an interrupt: not a result
                    break
                result["lab"] = index
                self._record(result)
        finally:
            if env is not None:
                env.close()
            self.envs.pop(index, None)
            self.building.pop(index, None)

    def _record(self, result: dict) -> None:
        with self.lock:
            self.results.append(result)
            self.sink.write(json.dumps(result) + "\n")
            self.sink.flush()
            outcome = "ok" if result["ok"] else "FAILED"
            print(f"trial {result['trial']} {'/'.join(key(result))} (lab {result['lab']}): "
                  f"{outcome} {result.get('fault', result.get('error', ''))[:200]} "
                  f"acked={result.get('acknowledged', 0)}", flush=True)
            if len(self.results) % len(self.kinds) == 0:      # a round's worth
                print(format_table(summarize(self.earlier + self.results)), flush=True)
