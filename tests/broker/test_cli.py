"""`odradek serve` start-up errors: clear one-line messages, no tracebacks."""

import socket
import subprocess
import sys

import pytest

from protocol import messages
from tests.broker.raw_client import RawClient
from tests.broker.subprocess_broker import ServeProcess


def serve(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "broker.cli", "serve", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
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


def test_unknown_keys_are_warned_about_kept_and_described(tmp_path):
    # Kafka 3.9 starts with keys it does not know in server.properties or --override (a plugin's or
    # metrics reporter's settings) and lists each in DescribeConfigs: value hidden, read-only,
    # sensitive, type UNKNOWN, from the static config.
    properties = tmp_path / "server.properties"
    properties.write_text("my.plugin.setting=abc\nnum.partitions=3\n")
    D = messages.DescribeConfigsRequest
    with ServeProcess(tmp_path / "data", "zz.unknown.key=7", config_file=properties) as served:
        with RawClient("127.0.0.1", served.port) as client:
            answer = client.request(32, 4, D(resources=[D.DescribeConfigsResource(
                resource_type=4, resource_name="1",
                configuration_keys=["my.plugin.setting", "zz.unknown.key", "num.partitions"])],
                include_synonyms=True))
    [result] = answer.results
    entries = {c.name: c for c in result.configs}
    assert entries["num.partitions"].value == "3"
    for name in ("my.plugin.setting", "zz.unknown.key"):
        entry = entries[name]
        assert (entry.value, entry.read_only, entry.is_sensitive, entry.config_source,
                entry.config_type) == (None, True, True, 4, 0)
        assert [(s.name, s.value, s.source) for s in entry.synonyms] == [(name, None, 4)]
    log = "".join(served.output)
    assert "unknown config key ignored" in log and "my.plugin.setting" in log
