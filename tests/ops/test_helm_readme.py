"""The chart README's table of values and values.yaml agree: every value in values.yaml has a row
(a map may be documented as a whole, like `config`, or key by key, like `probes`), every row names
a value that exists, and each row's default, read as YAML, is the default in values.yaml."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

CHART = Path(__file__).resolve().parents[2] / "helm" / "odradek"
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*`([^`]*)`\s*\|")


def readme_table(text: str) -> dict[str, object]:
    """{value path: default} from the rows of the README's "## Values" section."""
    section = text.split("\n## Values\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, object] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        match = ROW.match(line)
        assert match, f"a row whose value and default are not both in backticks: {line}"
        key, default = match.groups()
        assert key not in rows, f"{key} has two rows"
        rows[key] = yaml.safe_load(default) if default else ""
    return rows


def compare(values: dict, rows: dict[str, object]) -> tuple[list[str], list[str], list[str]]:
    """(values without a row, rows naming no value, rows whose default differs)."""
    undocumented, wrong_default, seen = [], [], set()

    def walk(node, path: str) -> None:
        if path in rows:
            seen.add(path)
            if rows[path] != node:
                wrong_default.append(f"{path}: README {rows[path]!r}, values.yaml {node!r}")
        elif isinstance(node, dict) and node:
            for key, child in node.items():
                walk(child, f"{path}.{key}" if path else key)
        else:
            undocumented.append(path)

    walk(values, "")
    return undocumented, sorted(set(rows) - seen), wrong_default


def test_every_value_is_in_the_readme_table_with_its_default():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = readme_table((CHART / "README.md").read_text())
    undocumented, unknown, wrong_default = compare(values, rows)
    assert undocumented == [], f"values.yaml entries missing from README.md's table: {undocumented}"
    assert unknown == [], f"README.md's table names values that values.yaml lacks: {unknown}"
    assert wrong_default == [], wrong_default
    assert len(rows) > 50


def test_the_comparison_notices_a_missing_row_a_stale_row_and_a_wrong_default():
    values = {"a": 1, "b": {"c": "x", "d": {}}, "e": {"f": 2}}
    rows = {"a": 1, "b.c": "y", "b.gone": 3, "e": {"f": 2}}
    assert compare(values, rows) == (["b.d"], ["b.gone"], ["b.c: README 'y', values.yaml 'x'"])


# ------------------------------------------------------------------ the README's examples render

def readme_examples(text: str) -> dict[str, dict]:
    """{### heading: the values of its ```yaml block} from the README's "## Examples" section."""
    section = text.split("\n## Examples\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for part in section.split("\n### ")[1:]:
        heading, body = part.split("\n", 1)
        (block,) = re.findall(r"```yaml\n(.*?)```", body, re.S)
        out[heading.strip()] = yaml.safe_load(block)
    return out


@pytest.fixture(scope="module")
def helm():
    from helm_tool import helm_binary

    try:
        return helm_binary()
    except RuntimeError as exc:
        pytest.skip(str(exc))


def _render(helm, values: dict, tmp_path) -> dict:
    path = tmp_path / "values-example.yaml"
    path.write_text(yaml.safe_dump(values))
    lint = subprocess.run([str(helm), "lint", "--strict", str(CHART), "-f", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    out = subprocess.run([str(helm), "template", "kafka", str(CHART), "-n", "kafka", "-f", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}


def _properties(docs, key="server.properties") -> dict[str, str]:
    text = docs[("ConfigMap", "kafka-odradek")]["data"][key]
    return dict(line.split("=", 1) for line in text.splitlines() if line and line[0] != "#")


def test_readme_examples_render_what_they_promise(helm, tmp_path):
    examples = readme_examples((CHART / "README.md").read_text())
    assert len(examples) == 4, list(examples)
    dev, production, split, secure = examples.values()

    docs = _render(helm, dev, tmp_path)
    sts = docs[("StatefulSet", "kafka-odradek")]["spec"]
    assert sts["replicas"] == 1 and "volumeClaimTemplates" not in sts
    assert not any(kind == "PodDisruptionBudget" for kind, _ in docs)
    props = _properties(docs)
    assert props["default.replication.factor"] == "1" and props["min.insync.replicas"] == "1"
    assert props["offsets.topic.replication.factor"] == "1"

    docs = _render(helm, production, tmp_path)
    sts = docs[("StatefulSet", "kafka-odradek")]["spec"]
    assert sts["replicas"] == 3
    assert sts["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "fast-ssd"
    pod = sts["template"]["spec"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" in pod["affinity"]["podAntiAffinity"]
    assert pod["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "DoNotSchedule"
    assert pod["containers"][0]["resources"]["limits"] == {"memory": "2Gi"}
    props = _properties(docs)
    assert props["default.replication.factor"] == "3" and props["min.insync.replicas"] == "2"
    assert docs[("PodDisruptionBudget", "kafka-odradek")]["spec"]["maxUnavailable"] == 1
    assert docs[("ServiceMonitor", "kafka-odradek")]["metadata"]["labels"]["release"] == "prometheus"
    assert ("ConfigMap", "kafka-odradek-dashboard") in docs

    docs = _render(helm, split, tmp_path)
    assert docs[("StatefulSet", "kafka-odradek-controller")]["spec"]["replicas"] == 3
    assert docs[("StatefulSet", "kafka-odradek-broker")]["spec"]["replicas"] == 5
    node_ports = sorted(port["nodePort"] for (kind, _), d in docs.items() if kind == "Service"
                        and d["spec"].get("type") == "NodePort" for port in d["spec"]["ports"])
    assert node_ports == [31090, 31091, 31092, 31093, 31094]

    docs = _render(helm, secure, tmp_path)
    assert any(kind == "Job" for kind, _ in docs)
    props = _properties(docs)
    assert "CLIENT:SASL_SSL" in props["listener.security.protocol.map"]
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,SCRAM-SHA-256"
