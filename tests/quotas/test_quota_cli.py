"""`odradek quotas describe|alter` against a running broker: tables, JSON, Kafka's errors."""

import json

import pytest

from broker.admin import main
from broker.testing import running_broker


@pytest.fixture
def cli(tmp_path, capsys):
    with running_broker(tmp_path / "data") as broker:
        def run(*argv):
            code = main([*argv, "-b", broker.bootstrap, "--timeout", "10"])
            out, err = capsys.readouterr()
            return code, out, err
        yield run


def test_alter_then_describe(cli):
    code, out, err = cli("quotas", "alter", "--user", "alice", "--client", "app",
                         "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    assert code == 0, err
    assert out.strip() == ("Altered client quotas of user=alice, client-id=app: "
                           "producer_byte_rate=1048576, consumer_byte_rate=2097152")
    assert cli("quotas", "alter", "--user-defaults", "--add-config", "request_percentage=12.5")[0] == 0
    code, out, _ = cli("quotas", "describe")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ENTITY", "QUOTA", "VALUE"]
    assert any("user=<default>" in line and "request_percentage" in line and "12.5" in line
               for line in lines)
    code, out, _ = cli("quotas", "describe", "--user", "alice", "--client", "app", "--json")
    assert json.loads(out) == {"quotas": [{
        "entity": {"client-id": "app", "user": "alice"},
        "values": {"consumer_byte_rate": 2097152.0, "producer_byte_rate": 1048576.0}}]}
    # exact entity only (strict): alice alone has no quotas
    assert json.loads(cli("quotas", "describe", "--user", "alice", "--json")[1]) == {"quotas": []}
    assert cli("quotas", "alter", "--user", "alice", "--client", "app",
               "--delete-config", "consumer_byte_rate")[0] == 0
    code, out, _ = cli("quotas", "describe", "--user", "alice", "--client", "app", "--json")
    assert json.loads(out)["quotas"][0]["values"] == {"producer_byte_rate": 1048576.0}


def test_refusals_are_kafka_errors(cli):
    code, _, err = cli("quotas", "alter", "--client", "x", "--add-config", "bogus=1")
    assert code == 1
    assert "INVALID_REQUEST" in err and "Invalid configuration key bogus" in err
    code, _, err = cli("quotas", "alter", "--client", "x", "--add-config", "producer_byte_rate=0.5")
    assert code == 1 and "cannot be a fractional value" in err
    code, _, err = cli("quotas", "alter", "--add-config", "producer_byte_rate=1")
    assert code == 1 and "give an entity" in err
