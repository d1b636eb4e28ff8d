"""Shared plumbing of the admin subcommands: common options, the client, the error handling."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from broker.admin.client import KafkaClient, KafkaError
from broker.admin.output import CommandFailed, error

DEFAULT_BOOTSTRAP = "localhost:9092"

Handler = Callable[[KafkaClient, argparse.Namespace], int]


def common_options() -> argparse.ArgumentParser:
    """Options every admin subcommand takes (so they may follow the subcommand)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT[,...]",
                        default=os.environ.get("ODRADEK_BOOTSTRAP_SERVER", DEFAULT_BOOTSTRAP),
                        help="broker(s) to connect to (env ODRADEK_BOOTSTRAP_SERVER; "
                             f"default {DEFAULT_BOOTSTRAP})")
    parent.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parent.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="per-request timeout (default 30)")
    parent.add_argument("--client-id", default="odradek-admin", help="client id sent to brokers")
    parent.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties (security.protocol, ssl.*, sasl.mechanism, "
                             "sasl.jaas.config or sasl.username/sasl.password)")
    return parent


def runs(handler: Handler) -> Callable[[argparse.Namespace], int]:
    """Wrap a handler: open a client, map failures to a message on stderr and exit status 1."""

    def run(args: argparse.Namespace) -> int:
        from broker.config import ConfigError
        try:
            security = None
            if getattr(args, "command_config", None):
                from broker.security.client import ClientSecurity
                security = ClientSecurity.from_file(args.command_config)
            with KafkaClient(args.bootstrap_server, client_id=args.client_id,
                             timeout=args.timeout, security=security) as client:
                return handler(client, args)
        except ConfigError as exc:
            error(f"--command-config: {exc}")
        except KafkaError as exc:
            error(str(exc))
        except CommandFailed as exc:
            error(str(exc))
        except ValueError as exc:
            error(str(exc))
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            # stdout closed early (e.g. piped into head): not our failure.
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            return 0
        return 1

    return run


def parse_pairs(items: list[str] | None, what: str = "config") -> dict[str, str]:
    """``["k=v", "a=b,c"]`` -> {"k": "v", "a": "b,c"}; a missing '=' is a usage error."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} {item!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out
