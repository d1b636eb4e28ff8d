"""The ``odradek`` command.

``odradek serve [--config server.properties] [--override key=value ...]`` runs a broker until SIGTERM or
SIGINT, then shuts down cleanly (stop accepting, finish in-flight requests, flush, checkpoint) and exits
0. Once listening it prints one line per listener, meant to be parsed by scripts::

    odradek: listening on PLAINTEXT://127.0.0.1:40123 (advertised as PLAINTEXT://127.0.0.1:40123)

A key it does not know is logged as a warning and otherwise ignored, as Kafka starts with a plugin's
settings in its server.properties; a bad value of a known key exits with status 2 and a one-line
``odradek: configuration error: ...``.

Other subcommands (admin tools) come from modules in ``COMMAND_MODULES`` that expose
``add_commands(subparsers)``; each adds parsers whose ``func(args) -> int`` runs the command.
"""

from __future__ import annotations

import argparse
import importlib
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
    from broker.logs import configure_logging, log_startup_banner, log_unknown_keys

    configure_logging(args.log_level, args.log_format, request_log=args.request_log)
    log_unknown_keys(config.unknown_keys)

    def announce(broker: Broker):
        for bound, advertised in broker.listening():
            print(f"odradek: listening on {bound} (advertised as {advertised})", flush=True)
        log_startup_banner(
            version=_version(), node_id=broker.node_id,
            listeners=[bound for bound, _ in broker.listening()],
            advertised_listeners=[advertised for _, advertised in broker.listening()],
            log_dirs=broker.config.log_dirs, overrides=_overrides(args.override),
            metrics_port=broker.metrics_port)

    node_class = Broker
    if "broker" not in config.roles:             # process.roles=controller: a dedicated controller
        from broker.cluster.controller_node import ControllerNode as node_class
    _raise_open_files_limit()
    from broker.loop_holds import instruments_from_env
    try:
        trio.run(node_class.run_until_signalled, config, announce, instruments=instruments_from_env())
    except BaseException as exc:   # trio wraps start-up failures in exception groups
        failure = _leaf(exc, (ConfigError, OSError))
        if failure is None:
            raise
        kind = "configuration error" if isinstance(failure, ConfigError) else "cannot start"
        print(f"odradek: {kind}: {failure}", file=sys.stderr, flush=True)
        return 2 if isinstance(failure, ConfigError) else 1
    print("odradek: stopped", flush=True)
    return 0


def _raise_open_files_limit() -> None:
    """The soft descriptor limit raised to the hard one, as the JVM does for Kafka (MaxFDLimit): a
    broker of thousands of partitions keeps their segments open instead of reopening them."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("odradek")
    except Exception:
        return "unknown"


def _overrides(items) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in items)


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
    serve.add_argument("--log-format", default="text", choices=["text", "json"])
    serve.add_argument("--request-log", action="store_true",
                       help="one log line per request (api, version, client, latency)")
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
