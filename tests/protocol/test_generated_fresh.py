"""The committed protocol/generated/ is exactly what the generator produces from the specs."""

import os
from pathlib import Path

import pytest

from protocol import codegen

SPECS = Path(os.environ.get("ODRADEK_KAFKA_SPECS", codegen.DEFAULT_SPECS))
COMMITTED = Path(codegen.__file__).resolve().parents[1] / "generated"


@pytest.mark.skipif(not (SPECS / "messages").is_dir(), reason=f"Kafka JSON specs not found at {SPECS}")
def test_committed_output_matches_a_fresh_generation(tmp_path):
    codegen.write(tmp_path, SPECS)
    fresh = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.py")}
    committed = {p.relative_to(COMMITTED) for p in COMMITTED.rglob("*.py")}
    assert fresh == committed, "generated file set differs: run `python -m protocol.codegen`"
    stale = sorted(str(rel) for rel in fresh if (tmp_path / rel).read_text() != (COMMITTED / rel).read_text())
    assert not stale, f"stale generated modules (run `python -m protocol.codegen`): {stale[:10]}"


def test_comment_stripping_keeps_slashes_inside_strings():
    text = '{"a": "http://x", // comment\n "b": 1} // end'
    assert codegen.spec.strip_comments(text).split() == ['{"a":', '"http://x",', '"b":', "1}"]


def test_generator_runs_without_the_generated_package(tmp_path):
    """`python -m protocol.codegen` must not need protocol/generated/ (it may be missing or broken)."""
    import subprocess
    import sys

    script = (
        "import sys, builtins\n"
        "real = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    if name.startswith('protocol.generated') or name in ('protocol.codec', 'protocol.messages'):\n"
        "        raise ImportError('generated package unavailable: ' + name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        "import protocol.codegen\n"
        "print(len(protocol.codegen.generate(kinds=('messages',))) if protocol.codegen.DEFAULT_SPECS.exists() else 'ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
