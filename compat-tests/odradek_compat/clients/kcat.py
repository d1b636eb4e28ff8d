"""kcat (librdkafka's CLI, the Debian package), driven as a subprocess per operation.

kcat reads records as delimited text and prints them with a format string; binary-safe output uses the
length tokens %K/%S (-1 for NULL). What its command line cannot express raises Unsupported.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import signal
import subprocess
import threading
import time

from ..records import Rec
from .base import Client, ClientError, Delivery, PollResult, Unsupported

# One record: "<partition> <offset> <timestamp> <key length> <value length>\n<key><value><headers>\n"
FORMAT = r"%p %o %T %K %S\n%k%s%h\n"
ASSIGNED = re.compile(r"rebalanced.*?: assigned: (.*)$")
REVOKED = re.compile(r"rebalanced.*?: revoked: (.*)$")
INCREMENTAL = re.compile(r"rebalanced: incremental (assignment|revoke) of \d+ partition\(s\) \(.*?\): ?(.*)$")


def missing() -> str | None:
    return None if shutil.which("kcat") else "kcat not installed (run compat-tests/setup.sh)"


def parse_records(data: bytes) -> tuple[list[Rec], bytes]:
    """Parses FORMAT output; returns the complete records and the unparsed rest."""
    out = []
    pos = 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        fields = data[pos:nl].split(b" ")
        if len(fields) != 5:
            raise ClientError(f"kcat printed an unexpected line: {data[pos:nl][:200]!r}")
        p, o, ts, klen, vlen = (int(f) for f in fields)
        cur = nl + 1
        key = None if klen < 0 else data[cur:cur + klen]
        cur += max(klen, 0)
        value = None if vlen < 0 else data[cur:cur + vlen]
        cur += max(vlen, 0)
        end = data.find(b"\n", cur)
        if cur > len(data) or end < 0:
            break
        out.append(Rec(key=key, value=value, headers=_parse_headers(data[cur:end]), partition=p, timestamp=ts,
                       offset=o))
        pos = end + 1
    return out, data[pos:]


def _parse_headers(text: bytes) -> list[tuple[str, bytes | None]]:
    if not text:
        return []
    headers = []
    for item in text.split(b","):
        name, _, value = item.partition(b"=")
        headers.append((name.decode(), None if value == b"NULL" else value))  # kcat prints null as NULL
    return headers


def _partitions_of(text: str) -> list[int]:
    return sorted(int(p) for p in re.findall(r"\[(\d+)\]", text))


class KcatClient(Client):
    name = "kcat"
    reports_cluster_id = False
    survives_disconnects = False  # kcat exits once all (here: the one) broker connections are down

    def _run(self, args: list[str], stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(["kcat", "-b", self.bootstrap, *args], input=stdin, capture_output=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"kcat {' '.join(args)} did not finish within {timeout}s") from None

    def metadata(self):
        proc = self._run(["-L", "-J", "-m", "30"])
        if proc.returncode:
            raise ClientError(proc.stderr.decode(errors="replace")[-1000:])
        md = json.loads(proc.stdout)
        brokers = []
        for b in md["brokers"]:
            host, _, port = b["name"].rpartition(":")
            brokers.append({"id": b["id"], "host": host, "port": int(port)})
        return {"cluster_id": None, "controller_id": md.get("controllerid"), "brokers": brokers,
                "topics": sorted(t["topic"] for t in md["topics"])}

    def partition_count(self, topic):
        proc = self._run(["-L", "-J", "-m", "30", "-t", topic])
        (t,) = json.loads(proc.stdout)["topics"]
        if t.get("error"):
            raise ClientError(t["error"])
        return len(t["partitions"])

    def produce(self, topic, records, *, acks="all", compression="none", idempotent=None, linger_ms=5, timeout=60):
        # One kcat run per run of records that share headers, partition and NULL handling (-Z); runs are
        # formed per target partition so order within a partition is kept with few kcat starts.
        by_partition: dict[int | None, list[Rec]] = {}
        for rec in records:
            by_partition.setdefault(rec.partition, []).append(rec)
        groups: list[tuple[tuple, list[Rec]]] = []
        for rec in (r for recs in by_partition.values() for r in recs):
            if rec.timestamp is not None:
                raise Unsupported("kcat cannot set a record's timestamp")
            if any(v is not None and (b"," in v or b"\n" in v or v == b"NULL") for _, v in rec.headers):
                raise Unsupported("kcat's -H/%h cannot carry header values with ',', newlines or 'NULL'")
            needs_null = rec.key is None or rec.value is None
            if needs_null and (rec.key == b"" or rec.value == b""):
                raise Unsupported("kcat cannot send an empty and a NULL field in one record")
            if (rec.key or b"").find(b"\t") >= 0 or b"\n" in (rec.key or b"") or b"\n" in (rec.value or b""):
                raise Unsupported("kcat's delimited input cannot carry tabs in keys or newlines")
            signature = (tuple(rec.headers), rec.partition, needs_null)
            if groups and groups[-1][0] == signature:
                groups[-1][1].append(rec)
            else:
                groups.append((signature, [rec]))
        deliveries = []
        for (headers, partition, needs_null), recs in groups:
            args = ["-P", "-t", topic, "-D", r"\n", "-X", f"acks={acks}", "-z", compression,
                    "-X", f"linger.ms={linger_ms}", "-X", f"message.timeout.ms={int(timeout * 1000) - 5000}"]
            if idempotent:
                args += ["-X", "enable.idempotence=true"]
            args += ["-K", r"\t"]  # always: a keyless line (empty key) can still carry an empty value
            if needs_null:
                args.append("-Z")
            if partition is not None:
                args += ["-p", str(partition)]
            for name, value in headers:
                args += ["-H", name if value is None else f"{name}={value.decode('latin-1')}"]
            lines = [(r.key or b"") + b"\t" + (r.value or b"") for r in recs]
            proc = self._run(args, stdin=b"\n".join(lines) + b"\n", timeout=timeout)
            errors = [line for line in proc.stderr.decode(errors="replace").splitlines()
                      if "Delivery failed" in line or "ERROR" in line]
            if proc.returncode or errors:
                deliveries += [Delivery(error="; ".join(errors) or f"kcat exited {proc.returncode}")] * len(recs)
            else:
                deliveries += [Delivery(partition=partition) for _ in recs]  # kcat -P prints no offsets
        return deliveries

    def consume(self, topic, *, partitions=None, start=None, isolation="read_uncommitted", timeout=30):
        parts = partitions if partitions is not None else list(range(self.partition_count(topic)))
        records = []
        for p in parts:  # one run per partition: -o applies to the partition given with -p
            offset = "beginning" if start is None else str(start[p])
            proc = self._run(["-C", "-t", topic, "-p", str(p), "-o", offset, "-e", "-f", FORMAT,
                              "-X", f"isolation.level={isolation}"], timeout=timeout)
            if proc.returncode:
                raise ClientError(proc.stderr.decode(errors="replace")[-1000:])
            got, rest = parse_records(proc.stdout)
            if rest:
                raise ClientError(f"kcat output ended mid-record: {rest[:200]!r}")
            records += got
        return records

    def _query(self, topic, partition, ts) -> int:
        proc = self._run(["-Q", "-t", f"{topic}:{partition}:{ts}"])
        match = re.search(r"\[\s*%d\s*\]\s+offset\s+(-?\d+)" % partition, proc.stdout.decode())
        if proc.returncode or not match:
            raise ClientError(f"kcat -Q: {proc.stdout.decode()[-500:]} {proc.stderr.decode()[-500:]}")
        return int(match.group(1))

    def offsets_for_times(self, topic, partition, timestamps):
        return [None if (o := self._query(topic, partition, ts)) < 0 else o for ts in timestamps]

    def list_offsets(self, topic, partitions):
        return {p: (self._query(topic, p, -2), self._query(topic, p, -1)) for p in partitions}

    # -- groups: a long-running `kcat -G` per member --
    class Member:
        def __init__(self, proc: subprocess.Popen):
            self.proc = proc
            self.chunks: queue.Queue = queue.Queue()
            self.buffer = b""
            self.assignment: list[int] = []
            self.assigned_events = 0
            self.revoked_events = 0
            self.stderr_tail: list[str] = []
            threading.Thread(target=self._read_stdout, daemon=True).start()
            threading.Thread(target=self._read_stderr, daemon=True).start()

        def _read_stdout(self):
            while chunk := self.proc.stdout.read1(65536):
                self.chunks.put(chunk)

        def _read_stderr(self):
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip()
                self.stderr_tail = (self.stderr_tail + [line])[-20:]
                if m := ASSIGNED.search(line):
                    self.assignment = _partitions_of(m.group(1))
                    self.assigned_events += 1
                elif m := REVOKED.search(line):
                    if _partitions_of(m.group(1)):
                        self.revoked_events += 1
                    self.assignment = []
                elif m := INCREMENTAL.search(line):  # cooperative protocol: changes, not whole assignments
                    changed = set(_partitions_of(m.group(2)))
                    if m.group(1) == "assignment":
                        self.assignment = sorted(set(self.assignment) | changed)
                        self.assigned_events += 1
                    else:
                        self.assignment = sorted(set(self.assignment) - changed)
                        self.revoked_events += 1 if changed else 0

    def group_open(self, group, topic, *, instance_id=None, assignor="range", session_timeout_ms=10000):
        args = ["kcat", "-b", self.bootstrap, "-G", group, "-u", "-f", FORMAT, "-X", "auto.offset.reset=earliest",
                "-X", f"partition.assignment.strategy={assignor}",
                "-X", f"session.timeout.ms={session_timeout_ms}", "-X", "heartbeat.interval.ms=1000",
                "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=200"]
        if instance_id is not None:
            args += ["-X", f"group.instance.id={instance_id}"]
        proc = subprocess.Popen([*args, topic], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self.Member(proc)

    def group_poll(self, member, timeout_ms=200):
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                member.buffer += member.chunks.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
        if member.proc.poll() is not None and member.proc.returncode not in (0, -signal.SIGTERM):
            raise ClientError(f"kcat -G exited {member.proc.returncode}: {' | '.join(member.stderr_tail[-5:])}")
        records, member.buffer = parse_records(member.buffer)
        return PollResult(records, list(member.assignment), member.assigned_events, member.revoked_events)

    def group_commit(self, member):
        # kcat has no commit command: it runs with auto-commit every 200 ms (and commits on close), so
        # waiting out two intervals commits what was printed so far.
        time.sleep(0.5)

    def group_close(self, member):
        member.proc.send_signal(signal.SIGTERM)  # kcat commits and leaves the group on SIGTERM
        try:
            member.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            member.proc.kill()
            member.proc.wait()
