"""Run fault trials and print what they found.

    python -m tests.faults.run --trials 50                  # every nemesis, 50 trials each
    python -m tests.faults.run --nemesis kill-leader,pause-leader --trials 5 --out faults-out
    python -m tests.faults.run --client librdkafka,java --trials 3   # both producers
    python -m tests.faults.run --parallel 3 --trials 50 --out faults-out    # 3 labs at once
    python -m tests.faults.run --parallel 3 --trials 50 --out faults-out --resume  # continue it
    python -m tests.faults.run --summarize faults-out [more-dirs...]        # the table only

A trial: a fresh topic (3 partitions, RF 3, min.insync.replicas=2); an idempotent acks=all producer
in the client namespace; the nemesis strikes once the producer has its first acknowledgement; the
producer stops a few seconds after the nemesis healed what it could; the environment recovers
(every node up, every partition's ISR full); a reader reads every partition to its high watermark; the
checker compares. `--client java`: the producer is the official Java client
(java/FaultProducer.java) instead of librdkafka, same history, same reader and checker; a list runs
both. Trials share one cluster until it fails to recover, when a new one is built (and
the trial counts as `unrecovered`). `--workload transactions`: consume-transform-produce in
transactions instead (see client.transform); `--workload group`: a consumer group under
membership churn (see client.group). Results go to `OUT/results.jsonl` as they come (a failing trial
also keeps its history, read and node logs in `OUT/trial-N/`); the summary table is printed after each
round (one trial of every nemesis and workload) and at the end. It stops by itself after the
trials or `--hours`. `--parallel N` runs N labs at once (each its own cluster, bridge, subnet and
namespaces; see labs.py), into the same results file. `--resume` continues a run in an existing
`--out`: the trials it holds count towards `--trials` per (workload, client, nemesis), and numbering
goes on after them (a run interrupted by Ctrl-C or SIGTERM records no half-done trial).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time

from tests.faults import checker, java_client, kafka_nodes, log_files
from tests.faults.env import BROKERS, FaultEnv
from tests.faults.labs import Run
from tests.faults.nemesis import CLIENT_SECONDS, GRACEFUL, NEMESES
from tests.faults.summary import CLIENTS, RESULTS, format_table, load_results, summarize

PRODUCE_RATE = 60           # records a second, over 3 partitions
AFTER_HEAL_S = 3.0          # the producer keeps going this long after the nemesis healed

REQUIRED_TOOLS = {"ip": "iproute2", "nft": "nftables"}
OPTIONAL_TOOLS = {"faketime": "faketime",          # libfaketime, for the clock-skew nemesis
                  "cc": "gcc"}                      # compiles the slow-fsync nemesis' shim


def ensure_tools() -> str | None:
    """Install the system tools the suite needs (root, apt); None when all are there, else why not."""
    wanted = {**REQUIRED_TOOLS, **OPTIONAL_TOOLS}
    absent = [package for tool, package in wanted.items() if not shutil.which(tool)]
    if absent and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-q", *absent], capture_output=True,
                       timeout=600)
    missing = [package for tool, package in REQUIRED_TOOLS.items() if not shutil.which(tool)]
    if missing:
        return f"missing {', '.join(missing)}"
    from tests.faults.netlab import available
    return available()


def run_trial(env: FaultEnv, nemesis: str, number: int, rng: random.Random, out_dir: str,
              max_seconds: float = 60, workload: str = "producer",
              client_name: str = "librdkafka") -> dict:
    """One trial on a running environment; raises TimeoutError when the cluster does not recover.
    `client_name` picks the producer of the producer workload (the others use librdkafka)."""
    max_seconds = max(max_seconds, CLIENT_SECONDS.get(nemesis, 0))
    trial_dir = os.path.join(out_dir, f"trial-{number}")
    # what an interrupted run left under this number (a stop file, a history) must not leak in
    shutil.rmtree(trial_dir, ignore_errors=True)
    os.makedirs(trial_dir)
    history_path = os.path.join(trial_dir, "history.jsonl")
    read_path = os.path.join(trial_dir, "read.jsonl")
    stop_file = os.path.join(trial_dir, "stop")
    read_file = os.path.join(trial_dir, "read")
    began = time.monotonic()
    reader = None       # a reader process started once the client is done (the Java producer)
    if workload == "producer" and client_name == "java":
        topic = read_topic = f"faults-{number}"
        env.create_topic(topic, partitions=3)
        client = env.spawn(java_client.producer_command(
            env.bootstrap, topic, 3, max_seconds, PRODUCE_RATE, history_path, stop_file),
            f"trial-{number}-producer-java.log")
        reader = ["read", "--topic", topic, "--history", read_path, "--seconds", "90",
                  "--acknowledged-in", history_path]
        check = checker.check_producer
        read_file = None
    elif workload == "producer":
        topic = read_topic = f"faults-{number}"
        env.create_topic(topic, partitions=3)
        client = env.client(["produce", "--topic", topic, "--rate", str(PRODUCE_RATE),
                             "--seconds", str(max_seconds), "--history", history_path,
                             "--stop-file", stop_file, "--read-topic", topic,
                             "--read-when", read_file, "--read-history", read_path],
                            f"trial-{number}-producer.log")
        check = checker.check_producer
    elif workload == "transactions":
        topic, read_topic = f"faults-{number}-in", f"faults-{number}-out"
        env.create_topic(topic, partitions=3)
        env.create_topic(read_topic, partitions=3)
        client = env.client(["transform", "--input", topic, "--output", read_topic,
                             "--group", f"faults-{number}", "--transactional-id", f"faults-{number}",
                             "--seconds", str(max_seconds + 60), "--history", history_path,
                             "--read-topic", read_topic, "--read-when", read_file,
                             "--read-history", read_path],
                            f"trial-{number}-transform.log")
        check = checker.check_transactions
    elif workload == "group":
        topic = read_topic = f"faults-{number}-group"
        env.create_topic(topic, partitions=3)
        client = env.client(["group", "--input", topic, "--group", f"faults-{number}",
                             "--seconds", str(max_seconds + 60), "--history", history_path],
                            f"trial-{number}-group.log")
        check = checker.check_group
        read_file = None
    else:
        raise ValueError(f"unknown workload {workload!r}")
    env.wait_until(lambda: any(e.get("type") == "ok" for e in checker.load(history_path)),
                   120, "the client's first acknowledgement")
    struck = time.monotonic() - began
    env.violations.clear()
    description = NEMESES[nemesis](env, topic, rng)
    healed = time.monotonic() - began
    time.sleep(AFTER_HEAL_S / 2 if env.quick else AFTER_HEAL_S)
    open(stop_file, "w").close()
    recovery_s = env.recover([topic, read_topic], timeout=env.recover_timeout_s)
    if read_file:
        open(read_file, "w").close()    # the client reads once its own work is done
    env.wait_client(client, max_seconds + 210)
    if reader:
        env.wait_client(env.client(reader, f"trial-{number}-reader.log"), 150)
    history, read = checker.load(history_path), checker.load(read_path)
    if check is checker.check_producer:
        # who wrote each copy: tells the client's re-sends in a new epoch from broker duplicates
        sessions = log_files.producer_sessions(
            [node.data_dir for node in env.cluster.nodes.values()], topic)
        result = check(history, read, sessions)
        errors = checker.delivery_errors(history)
        result["delivery_errors"] = len(errors)
        if errors and nemesis in GRACEFUL:
            env.violations.append(f"the producer saw {len(errors)} delivery errors under a "
                                  f"graceful fault, first {errors[0]}")
    else:
        result = check(history, read)
    # every copy of every partition the trial wrote must hold the same batches where they overlap
    diverged = {f"{name}-{index}": offset for name in dict.fromkeys((topic, read_topic))
                for index, offset in log_files.replica_divergence(
                    [node.data_dir for node in env.cluster.nodes.values()], name).items()}
    result["violations"] = list(env.violations)
    result["diverged"] = len(diverged)
    result["examples"]["diverged"] = sorted(diverged.items())[:10]
    result.update(trial=number, workload=workload, nemesis=nemesis, fault=description,
                  broker=env.broker,
                  client=client_name if workload == "producer" else "librdkafka",
                  struck_s=round(struck, 1), healed_s=round(healed, 1),
                  recovery_s=round(recovery_s, 1),
                  # a trial in which nothing was acknowledged checked nothing
                  ok=checker.ok(result) and result["acknowledged"] > 0)
    # a client's re-sends, and errors its application saw: evidence worth keeping
    if result["ok"] and not result.get("resent") and not result.get("delivery_errors"):
        shutil.rmtree(trial_dir, ignore_errors=True)
    else:
        _keep_logs(env, trial_dir, (topic, read_topic) + INTERNAL_TOPICS)
    return result


# what the group and transaction coordinators wrote: committed offsets, markers, transaction states
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def _keep_logs(env: FaultEnv, trial_dir: str, topics=()) -> None:
    """A failed trial's evidence: node logs, client logs, and each node's copy of the trial's
    partitions and of the coordinators' internal ones (segments, indexes, checkpoints) under
    node-N-data/."""
    os.makedirs(trial_dir, exist_ok=True)
    for node_id, node in env.cluster.nodes.items():
        if os.path.exists(node.log_path):
            shutil.copy(node.log_path, trial_dir)
        if not os.path.isdir(node.data_dir):
            continue
        for name in os.listdir(node.data_dir):
            if name.rsplit("-", 1)[0] in topics:
                shutil.copytree(os.path.join(node.data_dir, name),
                                os.path.join(trial_dir, f"node-{node_id}-data", name),
                                dirs_exist_ok=True)
    for name in os.listdir(env.root):
        if name.endswith(".log") and name.startswith("trial-"):
            shutil.copy(os.path.join(env.root, name), trial_dir)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=50, help="trials per nemesis (50)")
    parser.add_argument("--nemesis", default=",".join(NEMESES),
                        help="comma-separated, from: " + ", ".join(NEMESES))
    parser.add_argument("--out", default="faults-out", help="results directory (faults-out)")
    parser.add_argument("--workload", default="producer",
                        help="comma-separated, from: producer, transactions, group (producer)")
    parser.add_argument("--client", default="librdkafka",
                        help="the producer workload's client, comma-separated, from: "
                        "librdkafka, java (librdkafka)")
    parser.add_argument("--broker", default="odradek", choices=BROKERS,
                        help="what the nodes run: odradek, or Apache Kafka 3.9 as the oracle "
                        f"({kafka_nodes.KAFKA_HOME}, heap KAFKA_HEAP, default {kafka_nodes.HEAP})")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--hours", type=float, default=None, help="stop after this long")
    parser.add_argument("--parallel", type=int, default=1, metavar="N",
                        help="run N labs (each its own cluster and network) at once (1)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out: trials already there count")
    parser.add_argument("--quick", action="store_true",
                        help="hold every fault for its shortest span (as the CI slice does)")
    parser.add_argument("--summarize", nargs="+", metavar="DIR",
                        help="only print the table of the results in these run directories")
    args = parser.parse_args(argv)
    if args.summarize:
        results = [r for path in args.summarize for r in load_results(path)]
        print(format_table(summarize(results)))
        return 0 if all(r["ok"] for r in results) else 1
    names = [n.strip() for n in args.nemesis.split(",") if n.strip()]
    unknown = [n for n in names if n not in NEMESES]
    if unknown:
        parser.error(f"unknown nemesis {', '.join(unknown)}")
    workloads = [w.strip() for w in args.workload.split(",") if w.strip()]
    if set(workloads) - {"producer", "transactions", "group"}:
        parser.error(f"unknown workload in {args.workload}")
    clients = [c.strip() for c in args.client.split(",") if c.strip()]
    if not clients or set(clients) - set(CLIENTS):
        parser.error(f"unknown client in {args.client}")
    if args.parallel < 1:
        parser.error("--parallel must be at least 1")
    earlier = load_results(args.out) if os.path.exists(os.path.join(args.out, RESULTS)) else []
    if earlier and not args.resume:
        parser.error(f"{args.out} holds {len(earlier)} results already: --resume continues "
                     "that run, or choose another --out")
    other_brokers = {r.get("broker", "odradek") for r in earlier} - {args.broker}
    if other_brokers:
        parser.error(f"{args.out} holds results of {', '.join(sorted(other_brokers))} nodes: "
                     "choose another --out for --broker " + args.broker)
    if args.broker == "kafka":
        refused = [f"{n} ({kafka_nodes.UNSUPPORTED_NEMESES[n]})" for n in names
                   if n in kafka_nodes.UNSUPPORTED_NEMESES]
        if refused:
            parser.error("--broker kafka cannot run " + "; ".join(refused))
        if kafka_nodes.missing():
            print(f"faults: cannot run Kafka nodes: {kafka_nodes.missing()}", file=sys.stderr)
            return 2
    if "java" in clients and java_client.missing():
        print(f"faults: cannot run the Java producer: {java_client.missing()}", file=sys.stderr)
        return 2
    # the Java client drives only the producer workload; the others always use librdkafka
    runs = [(w, c) for w in workloads for c in (clients if w == "producer" else ["librdkafka"])]
    runs = list(dict.fromkeys(runs))
    problem = ensure_tools()
    if problem:
        print(f"faults: cannot run: {problem}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    kinds = [(workload, client_name, name) for workload, client_name in runs for name in names]
    run = Run(args.out, kinds, args.trials, earlier, seed, labs=args.parallel,
              hours=args.hours, quick=args.quick, trial=run_trial, keep_logs=_keep_logs,
              broker=args.broker)
    print(f"faults: seed {seed}, {args.trials} trials of {', '.join(names)} "
          f"({len(run.tasks)} to run, {len(earlier)} done before) on {args.parallel} "
          f"lab(s) of {args.broker} nodes; results in {args.out}", flush=True)
    results = run.go()
    print(format_table(summarize(earlier + results)))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
