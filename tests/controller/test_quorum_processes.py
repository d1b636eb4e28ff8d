"""Three controller processes on loopback: election, kill -9 of the leader, restart and catch-up."""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

import protocol
from protocol import messages as m

from broker.controller.wire import METADATA_TOPIC

pytestmark = pytest.mark.timeout(120)


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _request(port, api_key, version, body, timeout=2.0):
    data = protocol.encode_request(api_key, version, 7, "test", body)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(len(data).to_bytes(4, "big") + data)
        size = int.from_bytes(_recv(sock, 4), "big")
        _, resp = protocol.decode_response(api_key, version, _recv(sock, size))
    return resp


def _recv(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _describe(port):
    req = m.DescribeQuorumRequest
    body = req(topics=[req.TopicData(topic_name=METADATA_TOPIC, partitions=[req.PartitionData(partition_index=0)])])
    try:
        resp = _request(port, 55, 1, body)
    except OSError:
        return None
    return resp.topics[0].partitions[0]


def _allocate(port):
    try:
        return _request(port, 67, 0, m.AllocateProducerIdsRequest(broker_id=1, broker_epoch=-1), timeout=5)
    except OSError:
        return None


class Quorum:
    def __init__(self, tmp_path):
        self.ports = dict(zip((1, 2, 3), _free_ports(3)))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        self.tmp = tmp_path
        self.procs = {}

    def start(self, node):
        log = open(self.tmp / f"node{node}.log", "ab")
        self.procs[node] = subprocess.Popen(
            [sys.executable, "-m", "broker.controller.node", "--node-id", str(node), "--voters", self.voters,
             "--log-dir", str(self.tmp / f"c{node}"), "--election-timeout-ms", "300",
             "--fetch-timeout-ms", "600", "--snapshot-every", "4"],
            stdout=log, stderr=subprocess.STDOUT, cwd=os.getcwd())

    def kill9(self, node):
        self.procs[node].send_signal(signal.SIGKILL)
        self.procs[node].wait(10)

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)

    def leader(self, exclude=(), deadline=30.0):
        """(leader id, its DescribeQuorum partition) once some live node answers as leader."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            for node, port in self.ports.items():
                if node in exclude:
                    continue
                part = _describe(port)
                if part is not None and part.error_code == 0:
                    return node, part
            time.sleep(0.1)
        raise AssertionError("no leader elected in time: " + self.logs())

    def allocate(self, node, deadline=20.0):
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            resp = _allocate(self.ports[node])
            if resp is not None and resp.error_code == 0:
                return resp.producer_id_start
            time.sleep(0.1)
        raise AssertionError(f"node {node} did not commit: " + self.logs())

    def logs(self):
        return "\n".join((self.tmp / f"node{n}.log").read_text()[-2000:] for n in self.procs)


def test_three_processes_survive_leader_loss_and_catch_up(tmp_path):
    q = Quorum(tmp_path)
    try:
        for node in (1, 2, 3):
            q.start(node)
        leader, part = q.leader()
        first = q.allocate(leader)
        second = q.allocate(leader)
        assert second == first + 1000

        q.kill9(leader)
        killed_at = time.monotonic()
        new_leader, part = q.leader(exclude={leader})
        assert new_leader != leader
        third = q.allocate(new_leader)
        elapsed = time.monotonic() - killed_at
        assert third == second + 1000            # the committed blocks survived the leader's death
        assert elapsed < 15, f"new leader took {elapsed:.1f}s"
        for _ in range(8):                        # enough that the leader's log starts past the old node's
            third = q.allocate(new_leader)

        q.start(leader)                           # restart the old leader: it catches up via a snapshot
        end = time.monotonic() + 30
        while time.monotonic() < end:
            _, part = q.leader(exclude={leader})
            states = {r.replica_id: r.log_end_offset for r in part.current_voters}
            if states.get(leader, -1) >= part.high_watermark > 0:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"restarted node did not catch up: {states} hw={part.high_watermark}")
        assert sorted(states) == [1, 2, 3]
        assert "installed the leader's snapshot" in (tmp_path / f"node{leader}.log").read_text()
        assert q.allocate(new_leader) == third + 1000

        # A broker registers with the quorum over Kafka's broker-to-controller RPCs.
        port = q.ports[new_leader]
        listener = m.BrokerRegistrationRequest.Listener(name="PLAINTEXT", host="h", port=9092, security_protocol=0)
        R = m.BrokerRegistrationRequest
        reg = _request(port, 62, 0, R(
            broker_id=7, cluster_id="odradek-quorum", incarnation_id=uuid.uuid4(), listeners=[listener],
            features=[R.Feature(name="metadata.version", min_supported_version=7, max_supported_version=22)]))
        assert reg.error_code == 0 and reg.broker_epoch > 0
        beat = _request(port, 63, 0, m.BrokerHeartbeatRequest(broker_id=7, broker_epoch=reg.broker_epoch,
                                                              current_metadata_offset=reg.broker_epoch))
        assert beat.error_code == 0 and not beat.is_fenced and beat.is_caught_up
        wrong = _request(port, 62, 0, m.BrokerRegistrationRequest(broker_id=8, cluster_id="other"))
        assert wrong.error_code == protocol.ErrorCode.INCONSISTENT_CLUSTER_ID
    finally:
        q.stop_all()
