"""The ``odradek`` command.

``odradek serve [--config server.properties] [--override key=value ...]`` runs a broker until SIGTERM or
SIGINT, then shuts down cleanly (stop accepting, finish in-flight requests, flush, checkpoint) and exits
0. Once listening it prints one line per listener, meant to be parsed by scripts::

    odradek: listening on PLAINTEXT://127.0.0.1:40123 (advertised as PLAINTEXT://127.0.0.1:40123)

A bad configuration exits with status 2 and a one-line ``odradek: configuration error: ...``.

Other subcommands (admin tools) come from modules in ``COMMAND_MODULES`` that expose
``add_commands(subparsers)``; each adds parsers whose ``func(args) -> int`` runs the command.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMAND_MODULES = ("broker.admin",)


def _serve(args) -> int:
    import trio

    from broker.config import BrokerConfig, ConfigError
    from broker.server import Broker

    try:
        config = BrokerConfig.load(args.config, args.override)
    except ConfigError as exc:
        print(f"odradek: configuration error: {exc}", file=sys.stderr, flush=True)
        return 2
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    def announce(broker: Broker):
        for bound, advertised in broker.listening():
            print(f"odradek: listening on {bound} (advertised as {advertised})", flush=True)

    try:
        trio.run(Broker.run_until_signalled, config, announce)
    except BaseException as exc:   # trio wraps start-up failures in exception groups
        failure = _leaf(exc, (ConfigError, OSError))
        if failure is None:
            raise
        kind = "configuration error" if isinstance(failure, ConfigError) else "cannot start"
        print(f"odradek: {kind}: {failure}", file=sys.stderr, flush=True)
        return 2 if isinstance(failure, ConfigError) else 1
    print("odradek: stopped", flush=True)
    return 0


def _leaf(exc: BaseException, kinds: tuple) -> BaseException | None:
    """The first exception of one of `kinds` inside (possibly nested) exception groups."""
    if isinstance(exc, kinds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _leaf(inner, kinds)
            if found is not None:
                return found
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek",
                                     description="A Kafka-wire-compatible message broker.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    serve = subparsers.add_parser("serve", help="run a broker")
    serve.add_argument("--config", "-c", metavar="FILE",
                       help="server.properties file (Kafka's names); embedded defaults otherwise")
    serve.add_argument("--override", "-o", action="append", default=[], metavar="KEY=VALUE",
                       help="set one config value; repeatable; wins over --config")
    serve.add_argument("--log-level", default="info",
                       choices=["debug", "info", "warning", "error"])
    serve.set_defaults(func=_serve)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.add_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
