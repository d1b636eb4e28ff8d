"""The Helm chart: lint, render, and check what Kubernetes would run against what the broker
accepts (its rendered server.properties starts a real broker)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.config import BrokerConfig

yaml = pytest.importorskip("yaml")

CHART = Path(__file__).resolve().parents[2] / "helm" / "odradek"


@pytest.fixture(scope="module")
def helm():
    from helm_tool import helm_binary

    try:
        return helm_binary()
    except RuntimeError as exc:
        pytest.skip(str(exc))


def render(helm, *sets: str) -> dict:
    args = [str(helm), "template", "rel", str(CHART), "--namespace", "kafka"]
    for item in sets:
        args += ["--set", item]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}


def test_chart_lints(helm):
    result = subprocess.run([str(helm), "lint", "--strict", str(CHART)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_single_broker_rendering(helm):
    docs = render(helm)
    assert set(docs) == {("ConfigMap", "rel-odradek"), ("Service", "rel-odradek"),
                         ("Service", "rel-odradek-headless"), ("StatefulSet", "rel-odradek"),
                         ("Pod", "rel-odradek-test-produce-consume")}
    sts = docs[("StatefulSet", "rel-odradek")]["spec"]
    assert sts["serviceName"] == "rel-odradek-headless" and sts["replicas"] == 1
    pod = sts["template"]
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "9404"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 60
    (container,) = pod["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == \
        {"kafka": 9092, "internal": 9094, "metrics": 9404}
    script = container["command"][-1]
    assert "HOST=${POD_NAME}.rel-odradek-headless.${POD_NAMESPACE}.svc" in script
    assert 'exec odradek serve --config "$CONFIG"' in script
    assert "CONFIG=/etc/odradek/server.properties" in script
    assert "advertised.listeners=CLIENT://$HOST:9092,INTERNAL://$HOST:9094" in script
    (claim,) = sts["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["data"] == "/var/lib/odradek" and mounts["config"] == "/etc/odradek"

    headless = docs[("Service", "rel-odradek-headless")]["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    client = docs[("Service", "rel-odradek")]["spec"]
    assert {p["name"]: p["port"] for p in client["ports"]} == {"kafka": 9092, "metrics": 9404}


def _server_properties(docs, tmp_path) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(docs[("ConfigMap", "rel-odradek")]["data"]["server.properties"])
    return path


def test_three_brokers_render_a_quorum(helm, tmp_path):
    docs = render(helm, "replicaCount=3", "serviceMonitor.enabled=true",
                  "persistence.enabled=false")
    assert ("ServiceMonitor", "rel-odradek") in docs
    assert ("PodDisruptionBudget", "rel-odradek") in docs
    sts = docs[("StatefulSet", "rel-odradek")]["spec"]
    assert sts["podManagementPolicy"] == "Parallel" and "volumeClaimTemplates" not in sts
    host = "rel-odradek-2.rel-odradek-headless.kafka.svc"
    config = BrokerConfig.load(str(_server_properties(docs, tmp_path)), [
        "node.id=2", f"advertised.listeners=CLIENT://{host}:9092,INTERNAL://{host}:9094"])
    assert config["controller.quorum.voters"] == [
        f"{i}@rel-odradek-{i}.rel-odradek-headless.kafka.svc:9093" for i in range(3)]
    assert config["default.replication.factor"] == 3 and config["min.insync.replicas"] == 2
    assert config["offsets.topic.replication.factor"] == 3
    assert config["transaction.state.log.replication.factor"] == 3
    assert config["transaction.state.log.min.isr"] == 2


@pytest.mark.timeout(60)
def test_rendered_config_runs_a_broker(helm, tmp_path):
    """What the pod runs, minus Kubernetes: the rendered server.properties plus the per-pod
    overrides (paths and ports moved to the test sandbox) starts a ready broker that exits 0."""
    import socket

    from ops_helpers import http_get

    properties = _server_properties(render(helm), tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        metrics_port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from broker.cli import main; sys.exit(main())",
         "serve", "--config", str(properties), "--log-level", "info",
         "--override", "node.id=0",
         "--override", "listeners=CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'data'}",
         "--override", f"metrics.port={metrics_port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = http_get(metrics_port, "/readyz", timeout=2)[0]
            except OSError:
                status = None
            if status == 200:
                break
            time.sleep(0.05)
        assert status == 200, proc.stderr.read() if proc.poll() is not None else status
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_grafana_dashboard_config_map(helm):
    import json

    docs = render(helm, "grafanaDashboard.enabled=true")
    cm = docs[("ConfigMap", "rel-odradek-dashboard")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["odradek.json"])
    assert dashboard["uid"] == "odradek-overview" and len(dashboard["panels"]) >= 10
    assert ("ConfigMap", "rel-odradek-dashboard") not in render(helm)
