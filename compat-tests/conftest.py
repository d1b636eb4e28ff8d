"""Fixtures of the compatibility matrix: the broker under test, one adapter per client, fresh names.

Run: `.venv/bin/python -m pytest compat-tests` (after `bash compat-tests/setup.sh`). By default an
`odradek serve` subprocess is started for the session (COMPAT_CLUSTER=3: a 3-node cluster); COMPAT_BOOTSTRAP=host:port targets a running broker
and COMPAT_BROKER_CMD='... {port} ... {data_dir}' starts another broker command (see odradek_compat/brokers.py).
The known-failure xfails (odradek_compat/known_failures.py) apply only to Odradek; COMPAT_IGNORE_KNOWN=1
drops them to see every raw outcome.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from odradek_compat import brokers  # noqa: E402
from odradek_compat.clients import CLIENTS, Unsupported, make_client, unavailable  # noqa: E402
from odradek_compat.known_failures import KNOWN_FAILURES  # noqa: E402
from odradek_compat.report import MatrixReport  # noqa: E402
from odradek_compat import spark as spark_support  # noqa: E402


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("odradek-compat-matrix"):
        config.pluginmanager.register(MatrixReport(), "odradek-compat-matrix")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    if "slow" not in (config.getoption("-m") or ""):   # as tests/conftest.py: also when run alone
        for item in items:
            if "slow" in item.keywords and str(item.fspath).startswith(here):
                item.add_marker(pytest.mark.skip(reason="slow: run with -m slow"))
    targets_odradek = not (brokers.external_bootstrap() or os.environ.get("COMPAT_BROKER_CMD")
                           or os.environ.get("COMPAT_IGNORE_KNOWN"))
    for item in items:
        if not str(item.fspath).startswith(here):
            continue
        item.add_marker(pytest.mark.filterwarnings("ignore::DeprecationWarning"))  # client libraries' own
        name = f"{os.path.basename(str(item.fspath))}::{item.name}"
        for pattern, reason in KNOWN_FAILURES.items() if targets_odradek else ():
            if fnmatch.fnmatchcase(name, pattern):
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
                break


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A capability the client's API lacks (Unsupported) is a skip with its reason, not a failure."""
    outcome = yield
    excinfo = outcome.excinfo
    if excinfo is not None and isinstance(excinfo[1], Unsupported):
        outcome.force_exception(pytest.skip.Exception(str(excinfo[1]), _use_item_location=True))


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """The session's shared broker: {"bootstrap": "host:port", "process": BrokerProcess | None}.
    COMPAT_CLUSTER=N runs the scenarios against an N-node cluster (combined broker+controller nodes,
    broker.testing_cluster) instead of one broker."""
    external = brokers.external_bootstrap()
    if external:
        yield {"bootstrap": external, "process": None}
        return
    nodes = int(os.environ.get("COMPAT_CLUSTER") or 0)
    if nodes:
        from broker.testing_cluster import running_cluster

        with running_cluster(tmp_path_factory.mktemp("cluster"), nodes=nodes) as cluster:
            yield {"bootstrap": cluster.bootstrap, "process": None}
        return
    process = brokers.BrokerProcess("session")
    process.start()
    yield {"bootstrap": process.bootstrap, "process": process}
    process.close()


@pytest.fixture
def own_broker():
    """A fresh broker for this test alone (restart and fault scenarios); skips against an external broker."""
    if brokers.external_bootstrap():
        pytest.skip("needs a broker the harness starts itself (COMPAT_BOOTSTRAP is set)")
    started = []

    def start(advertised_port: int | None = None) -> brokers.BrokerProcess:
        process = brokers.BrokerProcess("own", advertised_port)
        started.append(process)
        process.start()
        return process

    yield start
    for process in started:
        process.close()


def _client_params():
    return [pytest.param(name, id=name) for name in CLIENTS]


@pytest.fixture(scope="session", params=_client_params())
def client(request, broker):
    reason = unavailable(request.param)
    if reason:
        pytest.skip(reason)
    c = make_client(request.param, broker["bootstrap"])
    yield c
    c.close()


@pytest.fixture(scope="session")
def helper(broker):
    """confluent-kafka on the same broker, for set-up steps outside what the scenario tests (e.g. creating
    a topic before kcat produces to it)."""
    c = make_client("confluent-kafka", broker["bootstrap"])
    yield c
    c.close()


@pytest.fixture(scope="session")
def spark():
    """One SparkSession with the Kafka connector for every Spark test (its JVM start-up is the cost)."""
    reason = spark_support.missing()
    if reason:
        pytest.skip(reason)
    session = spark_support.start_session()
    yield session
    session.stop()


@pytest.fixture
def names(request):
    """Fresh topic/group/transactional-id names for this test: names("orders") -> "orders-<test>-<random>"."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80]
    suffix = uuid.uuid4().hex[:8]
    return lambda kind: f"{kind}-{base}-{suffix}"
