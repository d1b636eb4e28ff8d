"""Admin tools: the ``odradek`` subcommands that manage a cluster over the Kafka protocol.

They speak only the wire protocol (through ``broker.admin.client`` and our codec), so they work
against Apache Kafka and other Kafka-compatible brokers as well as Odradek.

    odradek topics create|list|describe|delete|alter-configs|add-partitions
    odradek groups list|describe|reset-offsets|delete
    odradek configs describe|alter   (--topic T | --broker ID | --broker-defaults | --broker-logger ID)
    odradek quotas describe|alter    (--user U | --user-defaults, --client C | --client-defaults, --ip)
    odradek offsets TOPIC [--time earliest|latest|max-timestamp|MS|ISO]
    odradek delete-records TOPIC --before-offset N
    odradek produce TOPIC / odradek consume TOPIC   (console tools)
    odradek cluster describe|api-versions / odradek quorum describe
    odradek users scram set|delete|describe
    odradek tokens create|renew|expire|describe   (delegation tokens, kafka-delegation-tokens' options)
    odradek acls create|list|delete   (kafka-acls' options: --allow-principal, --topic, ...)
    odradek reassign --reassignment-json-file PLAN --execute|--verify|--cancel

Every command takes ``--bootstrap-server`` (``-b``), ``--json``, ``--timeout`` and ``--command-config``
(Kafka client properties: TLS, SASL); prints tables
(or JSON) on stdout, errors as ``odradek: error: <what>: <KAFKA_ERROR_NAME>: <message>`` on
stderr, and exits 0 on success, 1 on a failure, 2 on a usage error.

Public surface:
    register(subparsers) / add_commands(subparsers)   add the subcommands to an argparse parser
    main(argv) -> int                                  run standalone (``python -m broker.admin``)
    broker.admin.client.KafkaClient                    the synchronous client (also for tests)
"""

from __future__ import annotations

import argparse

from broker.admin import (
    acls, cluster, configs, console, groups, offsets, quotas, reassign, tokens, topics, users,
)
from broker.admin.common import common_options

_MODULES = (topics, groups, configs, quotas, offsets, console, cluster, users, tokens, acls,
            reassign)


def register(subparsers) -> None:
    """Add the admin subcommands to an ``argparse`` subparsers object; each sets ``func``."""
    common = common_options()
    for module in _MODULES:
        module.add_commands(subparsers, common)


add_commands = register  # the name broker/cli.py's COMMAND_MODULES protocol calls


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description="Odradek admin tools.")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
