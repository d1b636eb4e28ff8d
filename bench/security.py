"""TLS and SASL_SSL next to PLAINTEXT on one Odradek, in one run: produce and consume throughput
(librdkafka) and handshake rate (connections/s).

    python -m bench.security [--seconds 5] [--rounds 3] [--record-size 1024] [--json PATH]
                             [--baseline-tree DIR] [--consume-records N] [--kafka]

One ``odradek serve`` process gets three listeners (PLAINTEXT, SSL, SASL_SSL with SCRAM-SHA-256) and
certificates made for the run; each workload runs against each listener in turn, so the ratios
compare the same broker, data path and machine. The goal (issue 15) is TLS >= 0.6x PLAINTEXT.

``--baseline-tree DIR`` also starts an Odradek from another checkout (say ``git archive`` of the
commit before a change) and runs every workload on both in each round: a before/after comparison
under the same load. ``--kafka`` does the same with Apache Kafka 3.9 (``bench.security_kafka``:
the same three listeners, Kafka's TLS defaults), whose own TLS/PLAINTEXT ratios are the context for
Odradek's: the clients' decryption on the same cores is in both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

from bench import security_kafka, workloads
from bench.targets import ODRADEK_LAUNCHER, REPO_ROOT

LISTENING = re.compile(r"^odradek: listening on (\w+)://[\w.\-]+:(\d+)", re.M)
SCRAM_USER, SCRAM_PASSWORD = "bench", "bench-secret"
CONSUME_TOPIC = "bench-consume"   # --consume-records: the one topic every consume reads


def start_broker(directory: str, pki, root=REPO_ROOT) -> tuple[subprocess.Popen, dict[str, int]]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "log.dirs": os.path.join(directory, "data"),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "num.partitions": "1", "offsets.topic.num.partitions": "1",
        "log.segment.delete.delay.ms": "0",   # a measured round's topic is deleted at once
    }
    argv = [sys.executable, "-c", ODRADEK_LAUNCHER, "serve", "--log-level", "warning"]
    for key, value in overrides.items():
        argv += ["--override", f"{key}={value}"]
    log = open(os.path.join(directory, "odradek.log"), "w")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=root,
                               env={**os.environ, "PYTHONPATH": str(root)})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log.name) as handle:
            ports = {name: int(port) for name, port in LISTENING.findall(handle.read())}
        if len(ports) == 3:
            return process, ports
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("odradek did not start: " + open(log.name).read()[-2000:])


def client_configs(pki) -> dict[str, dict]:
    """librdkafka settings per listener (`pki` None: only the listener names matter)."""
    tls = {"security.protocol": "SSL", "ssl.ca.location": pki.path("ca.pem") if pki else ""}
    return {
        "PLAINTEXT": {},
        "SSL": tls,
        "SASL_SSL": {**tls, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                     "sasl.username": SCRAM_USER, "sasl.password": SCRAM_PASSWORD},
    }


def handshake_rate(port: int, listener: str, pki, seconds: float) -> float:
    """Sequential connections/s, each fully set up: TCP, TLS, (SCRAM), one ApiVersions."""
    from broker.admin.client import BrokerConnection
    from broker.security.client import ClientSecurity
    security = None
    if listener != "PLAINTEXT":
        properties = {"security.protocol": listener, "ssl.truststore.type": "PEM",
                      "ssl.truststore.location": pki.path("ca.pem")}
        if listener == "SASL_SSL":
            properties.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": SCRAM_USER,
                               "sasl.password": SCRAM_PASSWORD})
        security = ClientSecurity.from_properties(properties)
    count, deadline = 0, time.monotonic() + seconds
    started = time.monotonic()
    while time.monotonic() < deadline:
        BrokerConnection("127.0.0.1", port, security=security).close()
        count += 1
    return count / (time.monotonic() - started)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process used so far (from /proc: load-independent cost)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """User + system CPU time of this process, every thread (the consumer's, while it consumes)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def run(seconds: float, record_size: int, only=None, rounds: int = 3,
        baseline_tree: str | None = None, consume_records: int = 0, kafka: bool = False) -> dict:
    """`rounds` rounds, each running every listener's workloads in turn (so a burst of load from
    elsewhere hits every listener alike); each figure is the median over the rounds. Besides
    throughput, the broker's own CPU time per MB moved: a cost that the machine's load barely
    changes, unlike wall-clock throughput on a shared machine. With `baseline_tree`, a second
    broker from that checkout runs the same workloads in the same rounds (result["baseline"]).
    With `consume_records`, every consume reads one topic of that many records written up front,
    so each listener moves the same bytes (by default each reads back what its produce wrote).
    With `kafka`, Apache Kafka runs the same workloads in the same rounds (result["kafka"]), after
    one unmeasured pass of each for the JVM's JIT."""
    directory = tempfile.mkdtemp(prefix="odradek-bench-security-")
    load_before = os.getloadavg()[0]
    trees = {"this tree": REPO_ROOT}
    if baseline_tree:
        trees["baseline"] = os.path.abspath(baseline_tree)
    if kafka:
        trees["kafka"] = None
    brokers = {}
    try:
        for name, root in trees.items():
            brokers[name] = _start_with_user(os.path.join(directory, name.replace(" ", "-")), root)
            if consume_records:
                filled = workloads.fill(f"127.0.0.1:{brokers[name][1]['PLAINTEXT']}",
                                        CONSUME_TOPIC, 0, record_size, consume_records, {})
                if filled["records"] != consume_records:
                    raise RuntimeError(f"filling {CONSUME_TOPIC} failed: {filled}")
        listeners = [name for name in client_configs(None) if not only or name in only]
        samples = {tree: {name: [] for name in listeners} for tree in trees}
        if kafka:   # warm-up: the JIT compiles the hot paths before anything is measured
            process, ports, pki = brokers["kafka"]
            for listener in listeners:
                _one_round(process.pid, ports[listener], listener, client_configs(pki)[listener],
                           record_size, min(seconds, 2), -1, ports["PLAINTEXT"], consume_records)
        for round_number in range(rounds):
            for listener in listeners:
                for tree, (process, ports, pki) in brokers.items():
                    samples[tree][listener].append(_one_round(
                        process.pid, ports[listener], listener, client_configs(pki)[listener],
                        record_size, seconds, round_number, ports["PLAINTEXT"], consume_records))
        results = {}
        for tree, (process, ports, pki) in brokers.items():
            results[tree] = {}
            for listener, rows in samples[tree].items():
                row = {key: _median([r[key] for r in rows]) for key in rows[0]}
                row["errors"] = sum(r["errors"] for r in rows)
                row["handshakes_per_s"] = handshake_rate(ports[listener], listener, pki,
                                                         min(seconds, 3))
                results[tree][listener] = row
        result = {"record_size": record_size, "seconds": seconds, "rounds": rounds,
                  "consume_records": consume_records,
                  "listeners": results["this tree"], "samples": samples["this tree"],
                  "ktls": ktls_status(), "load_average": (load_before, os.getloadavg()[0])}
        if baseline_tree:
            result["baseline"] = {"tree": trees["baseline"], "listeners": results["baseline"],
                                  "samples": samples["baseline"]}
        if kafka:
            result["kafka"] = {"tree": security_kafka.describe(brokers["kafka"][0]),
                               "listeners": results["kafka"], "samples": samples["kafka"]}
        return result
    finally:
        for process, _, _ in brokers.values():
            process.terminate()
            process.wait(30)
        shutil.rmtree(directory, ignore_errors=True)


def _start_with_user(directory: str, root) -> tuple[subprocess.Popen, dict[str, int], object]:
    """A broker from checkout `root` (None: Apache Kafka) with its own certificates and the
    bench's SCRAM user."""
    from broker.admin.client import KafkaClient
    from broker.admin.users import set_credential
    from broker.security.pki import make_pki
    os.makedirs(directory)
    pki = make_pki(os.path.join(directory, "pki"))
    if root is None:
        process, ports = security_kafka.start_kafka(directory, pki)
    else:
        process, ports = start_broker(directory, pki, root)
    try:
        with KafkaClient(f"127.0.0.1:{ports['PLAINTEXT']}") as client:
            set_credential(client, SCRAM_USER, "SCRAM-SHA-256", SCRAM_PASSWORD, 4096)
    except BaseException:
        process.kill()
        raise
    return process, ports, pki


def _one_round(pid: int, port: int, listener: str, config: dict, record_size: int,
               seconds: float, round_number: int, plaintext_port: int,
               consume_records: int = 0) -> dict:
    bootstrap = f"127.0.0.1:{port}"
    topic = f"bench-{listener.lower()}-{round_number}"
    cpu = cpu_seconds(pid)
    produced = workloads.produce(bootstrap, topic, record_size, seconds, config, time.time() + 0.5)
    produce_cpu, cpu = cpu_seconds(pid) - cpu, cpu_seconds(pid)
    if consume_records:   # the same bytes over every listener
        source, count = CONSUME_TOPIC, consume_records
    else:
        source, count = topic, produced["records"]
    client_cpu = own_cpu_seconds()
    threads: dict[str, float] = {}
    consumed = workloads.consume(bootstrap, source, {0: count}, record_size, time.time() + 0.5, 120,
                                 {**config, "group.id": f"bench-{listener}-{round_number}"},
                                 threads)
    consume_cpu = cpu_seconds(pid) - cpu
    client_cpu = own_cpu_seconds() - client_cpu
    _delete_topic(plaintext_port, topic)
    produced_mb, consumed_mb = produced["bytes"] / 1e6, consumed["bytes"] / 1e6
    return {
        "produce_mb_s": produced_mb / (produced["end"] - produced["start"]),
        "consume_mb_s": consumed_mb / (consumed["end"] - consumed["start"]),
        # broker CPU ms per MB (includes the 0.5 s idle lead-in: a few ms)
        "produce_cpu_ms_per_mb": 1000 * produce_cpu / max(produced_mb, 1e-9),
        "consume_cpu_ms_per_mb": 1000 * consume_cpu / max(consumed_mb, 1e-9),
        # the consumer (librdkafka's threads and the Python loop) on the same two cores
        "consume_client_cpu_ms_per_mb": 1000 * client_cpu / max(consumed_mb, 1e-9),
        # ... split: librdkafka's broker thread (socket reads, TLS decryption, parsing the fetch
        # responses: the client's half of the fetch round trip) and the Python consume loop
        "consume_client_io_cpu_ms_per_mb": 1000 * sum(
            seconds for name, seconds in threads.items() if name.startswith("rdk:broker"))
            / max(consumed_mb, 1e-9),
        "consume_client_loop_cpu_ms_per_mb": 1000 * threads.get("consume loop", 0.0)
            / max(consumed_mb, 1e-9),
        "errors": produced["errors"] + consumed["errors"],
    }


def _delete_topic(plaintext_port: int, topic: str) -> None:
    """A round's records go once measured: many rounds of fast produce fill a small disk."""
    from broker.admin.client import KafkaClient
    from broker.admin.topics import delete_topics
    with KafkaClient(f"127.0.0.1:{plaintext_port}") as client:
        delete_topics(client, [topic])


def ktls_status() -> str:
    """Whether Fetch under TLS could use sendfile (kernel TLS) with this Python and kernel."""
    python = "yes" if hasattr(ssl, "OP_ENABLE_KTLS") else "no (the option bit could still be set)"
    return (f"Python ssl.OP_ENABLE_KTLS: {python} (Python {sys.version.split()[0]}, "
            f"{ssl.OPENSSL_VERSION}); kernel TLS ULP: {_kernel_tls()}; in any case OpenSSL runs "
            "over trio's memory BIOs here, and kTLS needs OpenSSL to own the socket")


def _kernel_tls() -> str:
    """Attach the kernel's ``tls`` ULP to a connected loopback socket: the definitive test."""
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            try:
                client.setsockopt(socket.IPPROTO_TCP, 31, b"tls")   # TCP_ULP
            except OSError as exc:
                return f"unavailable ({exc.strerror}: kernel built without CONFIG_TLS?)"
            return "available"
    finally:
        listener.close()


def report(result: dict) -> str:
    before, after = result["load_average"]
    consume = (f"; every consume reads the same {result['consume_records']:,} records"
               if result.get("consume_records") else "")
    lines = [f"record size {result['record_size']} B, {result['seconds']:g} s per workload, "
             f"median of {result['rounds']} interleaved rounds; load average {before:.1f} -> "
             f"{after:.1f}{consume}"]
    tables = [("this tree", result["listeners"])]
    if "baseline" in result:
        tables.append((f"baseline ({result['baseline']['tree']})", result["baseline"]["listeners"]))
    if "kafka" in result:
        tables.append((result["kafka"]["tree"], result["kafka"]["listeners"]))
    for title, rows in tables:
        if len(tables) > 1:
            lines.append(f"-- {title}")
        lines.extend(_table(rows))
    lines.append("ratios: throughput vs PLAINTEXT; CPU (inv): PLAINTEXT's broker CPU per MB over "
                 "this listener's (1.0 = TLS costs the broker nothing extra); client CPU: the "
                 "consumer's own CPU per MB (librdkafka + Python loop, same 2 cores); io / loop: of which "
                 "librdkafka's broker thread (socket, TLS decryption, parsing) / the Python loop")
    lines.append("kTLS: " + result["ktls"])
    return "\n".join(lines)


def _table(rows: dict) -> list[str]:
    base = rows.get("PLAINTEXT") or next(iter(rows.values()))
    lines = [f"{'listener':<11}{'produce MB/s':>13}{'ratio':>7}{'consume MB/s':>13}{'ratio':>7}"
             f"{'produce CPU':>13}{'ratio':>7}{'consume CPU':>13}{'ratio':>7}{'client CPU':>12}"
             f"{'io / loop':>14}{'handshakes/s':>13}{'errors':>7}",
             f"{'':<11}{'':>13}{'':>7}{'':>13}{'':>7}{'ms/MB':>13}{'(inv)':>7}{'ms/MB':>13}"
             f"{'(inv)':>7}{'ms/MB':>12}{'ms/MB':>14}"]
    for name, row in rows.items():
        lines.append(
            f"{name:<11}{row['produce_mb_s']:>13.1f}"
            f"{row['produce_mb_s'] / base['produce_mb_s']:>7.2f}"
            f"{row['consume_mb_s']:>13.1f}{row['consume_mb_s'] / base['consume_mb_s']:>7.2f}"
            f"{row['produce_cpu_ms_per_mb']:>13.2f}"
            f"{base['produce_cpu_ms_per_mb'] / row['produce_cpu_ms_per_mb']:>7.2f}"
            f"{row['consume_cpu_ms_per_mb']:>13.2f}"
            f"{base['consume_cpu_ms_per_mb'] / row['consume_cpu_ms_per_mb']:>7.2f}"
            f"{row.get('consume_client_cpu_ms_per_mb', float('nan')):>12.2f}"
            f"{row.get('consume_client_io_cpu_ms_per_mb', float('nan')):>7.2f} /"
            f"{row.get('consume_client_loop_cpu_ms_per_mb', float('nan')):>5.2f}"
            f"{row['handshakes_per_s']:>13.0f}{row['errors']:>7}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.security")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--listeners", nargs="*", metavar="NAME",
                        help="only these (PLAINTEXT first for the ratios)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds; figures are medians (default 3)")
    parser.add_argument("--consume-records", type=int, default=0, metavar="N",
                        help="every consume reads the same topic of N records (default: each "
                             "reads back what its produce wrote)")
    parser.add_argument("--baseline-tree", metavar="DIR",
                        help="also run an Odradek from this checkout in the same rounds")
    parser.add_argument("--kafka", action="store_true",
                        help="also run Apache Kafka 3.9 (bench.kafka's) in the same rounds")
    args = parser.parse_args(argv)
    result = run(args.seconds, args.record_size, args.listeners, args.rounds, args.baseline_tree,
                 args.consume_records, args.kafka)
    print(report(result))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    sys.exit(main())
