"""Odradek's real-client compatibility matrix: the harness behind compat-tests/.

Public surface (used by the test modules and conftest.py):
- `brokers`: `BrokerProcess` (an `odradek serve` subprocess on a free port with a fresh data dir, restartable)
  and `broker_from_env()` (``COMPAT_BOOTSTRAP=host:port`` points the matrix at an external broker,
  ``COMPAT_BROKER_CMD`` starts any other broker command instead of Odradek).
- `clients`: one adapter per client implementation (`CLIENTS`, `make_client`), all with the same methods
  (`clients.base.Client`); a method a client's API cannot express raises `Unsupported` → the test skips.
- `records.Rec`: a record as produced and as read back.
- `checks.expect`: assertions that name the client, the step, what was expected and what came back.
- `report`: the pytest plugin that prints the client × scenario table and writes it as JSON.
- `known_failures`: the strict xfails for scenarios Odradek cannot pass yet, each with its issue.
"""
