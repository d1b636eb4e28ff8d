"""The metadata quorum's settings: who votes, where controllers listen, and the start-up checks.

``controller.quorum.voters`` is Kafka's static voter list ``id@host:port,...``; KIP-853's
``controller.quorum.bootstrap.servers`` (``host:port,...``) names controllers to ask instead. With
neither, a node that is both broker and controller runs a quorum of one (Kafka's shipped single-node
setup). The checks refuse, as Kafka does, what can never form a working cluster.
"""

from __future__ import annotations

from .values import ConfigError

VOTERS = "controller.quorum.voters"
BOOTSTRAP = "controller.quorum.bootstrap.servers"


def _split_address(text: str, config_name: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ConfigError(f"Invalid address {text.strip()!r} in {config_name}: expected host:port",
                          config_name)
    return host.strip("[]"), int(port)


def parse_voters(entries) -> dict[int, tuple[str, int]]:
    """``["1@h1:9093", ...]`` -> {1: ("h1", 9093)}; duplicate ids are a configuration error."""
    voters: dict[int, tuple[str, int]] = {}
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        node, sep, address = entry.partition("@")
        if not sep or not node.strip().lstrip("-").isdigit():
            raise ConfigError(f"Invalid entry {entry!r} in {VOTERS}: expected id@host:port", VOTERS)
        node_id = int(node)
        if node_id < 0:
            raise ConfigError(f"Invalid voter id {node_id} in {VOTERS}", VOTERS)
        if node_id in voters:
            raise ConfigError(f"{VOTERS} lists voter id {node_id} more than once", VOTERS)
        voters[node_id] = _split_address(address, VOTERS)
    return voters


def parse_bootstrap_servers(entries) -> list[tuple[str, int]]:
    return [_split_address(entry, BOOTSTRAP) for entry in entries if entry.strip()]


_LOCAL_HOSTS = {"", "localhost", "127.0.0.1", "::1", "0.0.0.0", "::"}


def standalone_voters(config) -> dict[int, tuple[str, int]] | None:
    """KIP-853's standalone controller (Kafka's shipped single-node setup): the only bootstrap
    server is this node's own controller listener, so it alone votes."""
    servers = parse_bootstrap_servers(config.get(BOOTSTRAP))
    listener = config.controller_listener
    if len(servers) != 1 or listener is None or "controller" not in config.roles:
        return None
    host, port = servers[0]
    if port != listener.port or (host != listener.host and not
                                 {host, listener.host} <= _LOCAL_HOSTS):
        return None
    return {config.node_id: (host, port)}


def check_quorum_settings(config) -> None:
    """Refuse settings that can never join a quorum (raises ConfigError)."""
    roles = set(config.roles)
    voters = parse_voters(config.get(VOTERS))
    bootstrap = parse_bootstrap_servers(config.get(BOOTSTRAP))
    controller_names = config.controller_listener_names
    listener_names = [listener.name for listener in config.listeners]
    if not voters and not bootstrap:
        if roles != {"broker", "controller"}:
            raise ConfigError(f"{VOTERS} or {BOOTSTRAP} must be set when process.roles is "
                              f"{','.join(sorted(roles))}", VOTERS)
        return                                  # the single-node quorum of one
    if not controller_names:
        raise ConfigError("controller.listener.names must name the controller listener when "
                          f"{VOTERS} or {BOOTSTRAP} is set", "controller.listener.names")
    if "controller" in roles:
        if controller_names[0] not in listener_names:
            raise ConfigError(f"The controller listener {controller_names[0]} "
                              f"(controller.listener.names) is not in listeners", "listeners")
        if not voters:
            if standalone_voters(config) is None:
                raise ConfigError(
                    f"A controller with only {BOOTSTRAP} must be its single server (Kafka's "
                    f"standalone controller); list several controllers in {VOTERS}", BOOTSTRAP)
        elif config.node_id not in voters:
            raise ConfigError(f"node.id {config.node_id} is a controller but is not in {VOTERS} "
                              f"({','.join(str(v) for v in sorted(voters))})", VOTERS)
        if roles == {"controller"}:
            others = [n for n in listener_names if n not in controller_names]
            if others:
                raise ConfigError("With process.roles=controller, listeners may only hold the "
                                  f"controller listeners ({','.join(controller_names)}), not "
                                  f"{','.join(others)}", "listeners")
    else:
        inside = [n for n in controller_names if n in listener_names]
        if inside:
            raise ConfigError("With process.roles=broker, listeners must not hold the controller "
                              f"listener {inside[0]} (controller.listener.names)", "listeners")
        if config.node_id in voters:
            raise ConfigError(f"node.id {config.node_id} is in {VOTERS} but process.roles does "
                              "not include controller", VOTERS)
