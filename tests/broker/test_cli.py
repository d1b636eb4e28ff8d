"""`odradek serve` start-up errors: clear one-line messages, no tracebacks."""

import socket
import subprocess
import sys

import pytest


def serve(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "broker.cli", "serve", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["--override", "no.such.config=1"], "Unknown configuration 'no.such.config'"),
    (["--override", "num.partitions=many"], "Invalid value many for configuration num.partitions"),
    (["--override", "justakey"], "override must look like key=value"),
    (["--config", "/nonexistent/server.properties"], "cannot read config file"),
])
def test_bad_configuration_is_a_one_line_error(args, message):
    result = serve(*args)
    assert result.returncode == 2
    assert f"odradek: configuration error: {message}" in result.stderr
    assert "Traceback" not in result.stderr


def test_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve("--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                       "--override", f"log.dirs={tmp_path}")
    assert result.returncode == 1
    assert "odradek: cannot start:" in result.stderr and "Address already in use" in result.stderr
    assert "Traceback" not in result.stderr
