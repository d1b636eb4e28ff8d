"""The Helm chart over a matrix of values: `helm lint --strict`, `helm template`, every rendered
object validated against the Kubernetes API schemas of several releases (kubernetes-validate ships
them offline), every rendered server.properties accepted by the broker's own config loader, and
what each mode must render (voters, node ids, roles, listeners, external access, TLS and SASL)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from broker.config import BrokerConfig

yaml = pytest.importorskip("yaml")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

CHART = Path(__file__).resolve().parents[2] / "helm" / "odradek"
KUBERNETES_RELEASES = ["1.25.0", "1.29.0", "1.33.0", "1.37.0"]
CUSTOM_KINDS = {"ServiceMonitor"}   # a Prometheus Operator CRD, not in the core API schemas
SECURE = ["tls.existingSecret=odradek-tls", "sasl.existingSecret=odradek-users",
          "sasl.users={admin,alice}"]

MATRIX = {
    "dev-single-pod": ["persistence.enabled=false"],
    "defaults": [],
    "three-combined": ["replicaCount=3", "serviceMonitor.enabled=true",
                       "grafanaDashboard.enabled=true"],
    "five-combined-hard-anti-affinity": ["replicaCount=5", "podAntiAffinityPreset=hard",
                                         "topologySpread.whenUnsatisfiable=DoNotSchedule"],
    "split": ["mode=split"],
    "split-5-brokers-no-spread": ["mode=split", "broker.replicaCount=5", "controller.replicaCount=3",
                                  "topologySpread.enabled=false", "podAntiAffinityPreset=none",
                                  "controller.resources.requests.cpu=100m"],
    "nodeport": ["replicaCount=3", "externalAccess.enabled=true",
                 "externalAccess.service.nodePorts={31090,31091,31092}"],
    "loadbalancer-split": ["mode=split", "externalAccess.enabled=true",
                           "externalAccess.service.type=LoadBalancer",
                           "externalAccess.service.loadBalancerIPs={10.0.0.10,10.0.0.11,10.0.0.12}"],
    "tls": ["replicaCount=3", "listeners.client.protocol=SSL", "tls.existingSecret=odradek-tls",
            "tls.clientAuth=required"],
    "sasl-ssl-scram": ["replicaCount=3", "listeners.client.protocol=SASL_SSL", *SECURE],
    "sasl-plaintext-split-external": [
        "mode=split", "listeners.client.protocol=SASL_PLAINTEXT",
        "listeners.external.protocol=SASL_SSL", "externalAccess.enabled=true",
        "externalAccess.service.nodePorts={31090,31091,31092}",
        "externalAccess.hosts={kafka-0.example.com,kafka-1.example.com,kafka-2.example.com}",
        *SECURE],
    "user-config-wins": ["replicaCount=3", "config.min\\.insync\\.replicas=1",
                         "config.default\\.replication\\.factor=2", "resources.limits.memory=2Gi",
                         "tests.enabled=false", "podDisruptionBudget.enabled=false"],
}


@pytest.fixture(scope="module")
def helm():
    from helm_tool import helm_binary

    try:
        return helm_binary()
    except RuntimeError as exc:
        pytest.skip(str(exc))


def _set_args(sets) -> list[str]:
    return [arg for item in sets for arg in ("--set", item)]


def render(helm, sets, namespace="kafka") -> dict:
    out = subprocess.run([str(helm), "template", "rel", str(CHART), "--namespace", namespace,
                          *_set_args(sets)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}


def render_error(helm, sets) -> str:
    out = subprocess.run([str(helm), "template", "rel", str(CHART), *_set_args(sets)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0, "rendering should have failed"
    return out.stderr


def pod_script(sts) -> str:
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    return container["command"][-1]


def pod_overrides(script: str, pod: str, namespace="kafka") -> list[str]:
    """The --override values the pod's start script passes, with the shell variables the script
    derives from POD_NAME/POD_NAMESPACE/HOSTNAME filled in as they would be in that pod."""
    ordinal = int(pod.rsplit("-", 1)[1])
    host = re.search(r"HOST=(\S+)", script).group(1)
    host = host.replace("${POD_NAME}", pod).replace("${POD_NAMESPACE}", namespace)
    external = re.search(rf"^\s*{ordinal}\) EXTERNAL=(\S+) ;;", script, re.M)
    script = re.sub(r"\$\(\(ORDINAL \+ (\d+)\)\)", lambda m: str(ordinal + int(m.group(1))), script)
    out = []
    for value in re.findall(r"--override (\S+)", script):
        value = value.replace("$HOST", host)
        if external:
            value = value.replace("$EXTERNAL", external.group(1).replace("${HOST_IP}", "192.0.2.7"))
        out.append(value)
    return out


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_matrix_lints_renders_and_validates(helm, case, tmp_path):
    sets = MATRIX[case]
    lint = subprocess.run([str(helm), "lint", "--strict", str(CHART), *_set_args(sets)],
                          capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = render(helm, sets)
    for (kind, name), doc in docs.items():
        if kind in CUSTOM_KINDS:
            continue
        for release in KUBERNETES_RELEASES:
            try:
                kubernetes_validate.validate(doc, release, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{kind}/{name} is not valid for Kubernetes {release}: {exc.message}")
    # every pod's configuration loads in the broker's own config loader, with its overrides
    config_map = docs[("ConfigMap", "rel-odradek")]["data"]
    for (kind, name), sts in docs.items():
        if kind != "StatefulSet":
            continue
        script = pod_script(sts)
        key = re.search(r"CONFIG=/etc/odradek/(\S+)", script).group(1)
        path = tmp_path / key
        path.write_text(config_map[key])
        for ordinal in range(sts["spec"]["replicas"]):
            config = BrokerConfig.load(str(path), pod_overrides(script, f"{name}-{ordinal}"))
            assert config.node_id >= 0


def test_validation_catches_a_broken_object():
    """The schema check is not vacuous: a misspelt field fails it."""
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "x"},
           "spec": {"replicas": 1, "serviceName": "x", "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}},
                                 "spec": {"containers": [{"name": "c", "image": "i",
                                                          "imagePullPolcy": "Always"}]}}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, "1.33.0", strict=True)


def test_three_combined_nodes(helm, tmp_path):
    docs = render(helm, ["replicaCount=3"])
    sts = docs[("StatefulSet", "rel-odradek")]
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
    properties = docs[("ConfigMap", "rel-odradek")]["data"]["server.properties"]
    path = tmp_path / "server.properties"
    path.write_text(properties)
    pods = [f"rel-odradek-{i}" for i in range(3)]
    for i, pod in enumerate(pods):
        config = BrokerConfig.load(str(path), pod_overrides(pod_script(sts), pod))
        assert config.node_id == i and config.roles == ["broker", "controller"]
        host = f"{pod}.rel-odradek-headless.kafka.svc"
        assert config["advertised.listeners"] == f"CLIENT://{host}:9092,INTERNAL://{host}:9094"
    assert config["controller.quorum.voters"] == [
        f"{i}@rel-odradek-{i}.rel-odradek-headless.kafka.svc:9093" for i in range(3)]
    assert config["controller.listener.names"] == "CONTROLLER"
    assert config["inter.broker.listener.name"] == "INTERNAL"
    for key, value in {"default.replication.factor": 3, "min.insync.replicas": 2,
                       "offsets.topic.replication.factor": 3,
                       "transaction.state.log.replication.factor": 3,
                       "transaction.state.log.min.isr": 2}.items():
        assert config[key] == value, key
    # soft anti-affinity and zone spread by default, PDB of one
    spec = sts["spec"]["template"]["spec"]
    assert spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert spec["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    assert docs[("PodDisruptionBudget", "rel-odradek")]["spec"]["maxUnavailable"] == 1
    # durable defaults give way to the user's values, each key once
    user = render(helm, ["replicaCount=3", "config.min\\.insync\\.replicas=1"])
    text = user[("ConfigMap", "rel-odradek")]["data"]["server.properties"]
    assert re.findall(r"^min\.insync\.replicas=.*$", text, re.M) == ["min.insync.replicas=1"]


def test_split_mode(helm, tmp_path):
    docs = render(helm, ["mode=split", "broker.replicaCount=4"])
    controllers = docs[("StatefulSet", "rel-odradek-controller")]
    brokers = docs[("StatefulSet", "rel-odradek-broker")]
    data = docs[("ConfigMap", "rel-odradek")]["data"]
    (tmp_path / "c.properties").write_text(data["controller.properties"])
    (tmp_path / "b.properties").write_text(data["broker.properties"])
    ids = []
    for i in range(3):
        c = BrokerConfig.load(str(tmp_path / "c.properties"),
                              pod_overrides(pod_script(controllers), f"rel-odradek-controller-{i}"))
        assert c.roles == ["controller"] and "advertised.listeners" not in pod_script(controllers)
        ids.append(c.node_id)
    for i in range(4):
        b = BrokerConfig.load(str(tmp_path / "b.properties"),
                              pod_overrides(pod_script(brokers), f"rel-odradek-broker-{i}"))
        assert b.roles == ["broker"]
        ids.append(b.node_id)
    assert ids == [0, 1, 2, 100, 101, 102, 103]
    assert b["controller.quorum.voters"] == [
        f"{i}@rel-odradek-controller-{i}.rel-odradek-headless.kafka.svc:9093" for i in range(3)]
    assert "listeners=CONTROLLER://:9093\n" in data["controller.properties"]
    assert "listeners=CLIENT://:9092,INTERNAL://:9094\n" in data["broker.properties"]
    # the client service and the brokers' PDB select brokers only; each set has its own PDB
    client = docs[("Service", "rel-odradek")]["spec"]["selector"]
    assert client["app.kubernetes.io/component"] == "broker"
    assert {name for kind, name in docs if kind == "PodDisruptionBudget"} == \
        {"rel-odradek-controller", "rel-odradek-broker"}
    assert b["default.replication.factor"] == 3 and b["min.insync.replicas"] == 2


def test_external_access(helm):
    docs = render(helm, ["replicaCount=3", "externalAccess.enabled=true",
                         "externalAccess.service.nodePorts={31090,31091,31092}"])
    for i in range(3):
        svc = docs[("Service", f"rel-odradek-{i}-external")]["spec"]
        assert svc["type"] == "NodePort"
        assert svc["selector"]["statefulset.kubernetes.io/pod-name"] == f"rel-odradek-{i}"
        assert svc["ports"][0]["nodePort"] == 31090 + i
    script = pod_script(docs[("StatefulSet", "rel-odradek")])
    overrides = pod_overrides(script, "rel-odradek-1")
    assert "advertised.listeners=CLIENT://rel-odradek-1.rel-odradek-headless.kafka.svc:9092," \
           "INTERNAL://rel-odradek-1.rel-odradek-headless.kafka.svc:9094," \
           "EXTERNAL://192.0.2.7:31091" in overrides   # the node's IP (status.hostIP)
    lb = render(helm, ["mode=split", "externalAccess.enabled=true",
                       "externalAccess.service.type=LoadBalancer",
                       "externalAccess.hosts={a.example,b.example,c.example}"])
    assert lb[("Service", "rel-odradek-broker-2-external")]["spec"]["type"] == "LoadBalancer"
    overrides = pod_overrides(pod_script(lb[("StatefulSet", "rel-odradek-broker")]),
                              "rel-odradek-broker-2")
    assert any(o.endswith(",EXTERNAL://c.example:9095") for o in overrides)
    assert "nodePorts" in render_error(helm, ["externalAccess.enabled=true"])
    assert "loadBalancerIPs" in render_error(helm, ["externalAccess.enabled=true",
                                                    "externalAccess.service.type=LoadBalancer"])


def test_tls_and_sasl_from_secrets(helm):
    docs = render(helm, ["replicaCount=3", "listeners.client.protocol=SASL_SSL", *SECURE])
    text = docs[("ConfigMap", "rel-odradek")]["data"]["server.properties"]
    for line in ["listener.security.protocol.map=CLIENT:SASL_SSL,INTERNAL:PLAINTEXT,"
                 "CONTROLLER:PLAINTEXT", "ssl.keystore.type=PEM",
                 "ssl.keystore.location=/tmp/odradek-tls/keystore.pem",
                 "ssl.truststore.location=/etc/odradek/tls/ca.crt",
                 "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"]:
        assert line in text.splitlines(), line
    spec = docs[("StatefulSet", "rel-odradek")]["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    assert secrets == {"tls": "odradek-tls", "sasl": "odradek-users"}
    script = spec["containers"][0]["command"][-1]
    assert "listener.name.client.plain.sasl.jaas.config=" in script
    job = docs[("Job", "rel-odradek-scram-users")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    job_script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert 'users scram set "$user" --password-stdin -m SCRAM-SHA-256 -m SCRAM-SHA-512' in job_script
    assert "rel-odradek-2.rel-odradek-headless.kafka.svc:9094" in job_script
    test_pod = docs[("Pod", "rel-odradek-test-produce-consume")]
    test_script = test_pod["spec"]["containers"][0]["command"][-1]
    assert 'echo "security.protocol=SASL_SSL"' in test_script
    assert 'echo "sasl.mechanism=SCRAM-SHA-512"' in test_script
    assert "tls.existingSecret" in render_error(helm, ["listeners.client.protocol=SSL"])
    assert "sasl.existingSecret" in render_error(
        helm, ["listeners.client.protocol=SASL_PLAINTEXT"])
    assert "must be PLAINTEXT, SSL" in render_error(helm, ["listeners.client.protocol=TLS"])
    assert "mode must be" in render_error(helm, ["mode=both"])
