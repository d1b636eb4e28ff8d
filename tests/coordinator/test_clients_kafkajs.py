"""KafkaJS (from compat-tests/setup.sh) through its group protocol, idempotent and transactional producers."""

import json
import os
import shutil
import subprocess

import pytest

from broker.testing import running_broker

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "compat-tests", "node_modules")


@pytest.mark.timeout(120)
@pytest.mark.skipif(not (shutil.which("node") and os.path.isdir(os.path.join(MODULES, "kafkajs"))),
                    reason="needs node and compat-tests/node_modules/kafkajs (compat-tests/setup.sh)")
def test_kafkajs(tmp_path):
    with running_broker(tmp_path / "data") as broker:
        run = subprocess.run(["node", os.path.join(HERE, "clients", "coordinator_check.js"), broker.bootstrap, MODULES],
                             capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["seen"] == sorted(["committed"] + [f"v{i}" for i in range(10)])  # never the aborted one
    assert result["members"] == 1
    assert [1, "5"] in result["committed"]
    assert result["txnOffsets"] == [[0, "-1"], [1, "3"]]
