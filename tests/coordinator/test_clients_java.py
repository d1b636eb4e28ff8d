"""The Java client (kafka-clients 4.x, from compat-tests/setup.sh) through groups, idempotence, transactions."""

import os
import subprocess

import pytest

from broker.testing import running_broker
from tests.java_clients import JAVA, MISSING, compile_check, java_available

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.timeout(240)
@pytest.mark.skipif(not java_available(), reason=MISSING)
def test_java_client(tmp_path):
    classpath = compile_check(os.path.join(HERE, "clients", "CoordinatorCheck.java"), tmp_path / "classes")
    with running_broker(tmp_path / "data") as broker:
        run = subprocess.run([*JAVA, "-cp", classpath, "CoordinatorCheck", broker.bootstrap],
                             capture_output=True, text=True, timeout=200)
    facts = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    assert facts.get("done") == "true", run.stdout + run.stderr[-3000:]
    for assignor in ("RangeAssignor", "RoundRobinAssignor", "StickyAssignor", "CooperativeStickyAssignor"):
        assert facts[f"{assignor}.records"] == facts[f"{assignor}.distinct"] == "10000"
        assert facts[f"{assignor}.assigned"] == "4"
        assert facts[f"{assignor}.committed"] == "42/java-meta"
    assert facts["static.round0"] == facts["static.round1"] == "4/true"
    assert facts["read_committed"] == "c1,c2"
    assert facts["read_uncommitted"] == "c1,a1,c2"
    assert facts["txn.offset"] == "77"
    assert facts["txn.state"] == "CompleteCommit" and facts["group.state"] == "Empty"
