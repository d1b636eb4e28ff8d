"""The broker's effective configuration: defaults < embedded < file/overrides < dynamic."""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from protocol.errors import ErrorCode

from .broker_catalog import BROKER_CONFIGS, BROKER_PREFIXES, RENAMED
from .kafka_catalog import LISTENER_PREFIX_ONLY, PER_BROKER_ONLY
from .listeners import Listener, parse_listeners, _parse_protocol_map
from .properties import parse_properties
from .quorum import BOOTSTRAP, VOTERS, check_quorum_settings, parse_bootstrap_servers, parse_voters
from .topic_catalog import TOPIC_CONFIGS, Synonym
from .values import ConfigError, ConfigSource, ConfigType, DescribedConfig, parse_checked, render

# Our equivalent of Kafka's shipped config/server.properties: a one-node cluster that is its own
# controller, with internal topics sized for one node. These count as static (file) settings.
EMBEDDED_PROPERTIES: dict[str, str] = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "log.dirs": "./data",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def _embedded_under(settings: Mapping[str, str]) -> dict[str, str]:
    """The embedded properties a user's settings build on, minus those their keys replace."""
    base = dict(EMBEDDED_PROPERTIES)
    if "log.dir" in settings:           # log.dirs would win over the user's log.dir
        base.pop("log.dirs", None)
    if "broker.id" in settings:         # the legacy name for node.id
        base.pop("node.id", None)
    return base


def _fill_in_id_synonym(raw: dict[str, str]) -> None:
    """node.id and broker.id name one setting: as Kafka does, the one left unset takes the other's
    value, and is then described as a static setting like it."""
    if "node.id" in raw and "broker.id" not in raw:
        raw["broker.id"] = raw["node.id"]
    elif "broker.id" in raw and "node.id" not in raw:
        raw["node.id"] = raw["broker.id"]


class BrokerConfig:
    """The broker's effective configuration: defaults < embedded < file/overrides < dynamic."""

    def __init__(self, static: Mapping[str, str] | None = None, *, embedded: bool = True):
        static = dict(static or {})
        raw = _embedded_under(static) if embedded else {}
        raw.update(static)
        _fill_in_id_synonym(raw)
        self._static: dict[str, Any] = {}
        self._dynamic: dict[str, Any] = {}      # dynamic broker configs (controller), merged
        self._dynamic_default: dict[str, Any] = {}
        self._dynamic_broker: dict[str, Any] = {}
        self._dynamic_listener: dict[str, str] = {}   # listener.name.* keys set at runtime (texts)
        self._dynamic_texts: tuple[dict, dict] = ({}, {})   # (cluster-wide, this broker's) as stored
        # Keys outside the catalog (a plugin's or metrics reporter's settings): Kafka starts with
        # them, keeps them for DescribeConfigs and otherwise ignores them.
        self._static_custom: dict[str, str] = {}
        for name, text in raw.items():
            if name in RENAMED:
                if RENAMED[name] in raw:   # the current name wins
                    continue
                name = RENAMED[name]
            if name in BROKER_CONFIGS or name.startswith(BROKER_PREFIXES):
                self._static[name] = self._parse_broker_key(name, text)
            else:
                self._static_custom[name] = text
        self._check_consistency()

    # ---- construction
    @classmethod
    def load(cls, path: str | os.PathLike | None = None,
             overrides: Iterable[str] | Mapping[str, str] = ()) -> "BrokerConfig":
        """Read a properties file (optional) and ``key=value`` overrides; raise ConfigError."""
        raw: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as handle:
                    raw.update(parse_properties(handle.read()))
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        if isinstance(overrides, Mapping):
            raw.update(overrides)
        else:
            for item in overrides:
                key, sep, value = item.partition("=")
                if not sep or not key.strip():
                    raise ConfigError(f"override must look like key=value, got {item!r}")
                raw[key.strip()] = value.strip()
        return cls(raw)

    @staticmethod
    def _parse_broker_key(name: str, text: str) -> Any:
        definition = BROKER_CONFIGS.get(name)
        if definition is None:      # a listener.name.* override
            check_listener_key(name, text)
            return text
        return parse_checked(name, definition.type, definition.validator, text)

    def _check_consistency(self):
        roles = self.get("process.roles")
        if not roles:
            raise ConfigError("process.roles must be set (broker, controller or both)",
                              "process.roles")
        if len(set(roles)) != len(roles):
            raise ConfigError("process.roles has duplicate entries", "process.roles")
        if self.node_id < 0:
            raise ConfigError("node.id must be set to a non-negative integer", "node.id")
        broker_id = self.get("broker.id")
        if broker_id not in (-1, self.node_id):
            raise ConfigError("broker.id must equal node.id when both are set", "broker.id")
        protocol_map = self.protocol_map
        listeners = self.listeners  # parses and validates
        if "broker" in self.roles and not self.client_listeners:
            raise ConfigError("no client listener configured (listeners)", "listeners")
        advertised = parse_listeners(self.get("advertised.listeners"), protocol_map,
                                     "advertised.listeners")
        names = {listener.name for listener in listeners}
        for listener in advertised:
            if listener.name not in names:
                raise ConfigError(f"advertised listener {listener.name} is not in listeners",
                                  "advertised.listeners")
        check_quorum_settings(self)

    @property
    def unknown_keys(self) -> list[str]:
        """The static keys this broker does not know (kept, described, otherwise ignored)."""
        return sorted(self._static_custom)

    # ---- plain access
    def get(self, name: str) -> Any:
        if name in self._dynamic_listener:
            return self._dynamic_listener[name]
        if name in self._dynamic:
            return self._dynamic[name]
        if name in self._static:
            return self._static[name]
        return BROKER_CONFIGS[name].default

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def is_set(self, name: str) -> bool:
        return name in self._dynamic or name in self._static or name in self._dynamic_listener

    def source(self, name: str) -> ConfigSource:
        if name in self._dynamic_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self._dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self._static:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    # ---- dynamic (cluster-wide) broker configs, as stored by the controller
    def validate_dynamic(self, configs: Mapping[str, str | None], resource_name: str = "") -> dict[str, Any]:
        """Validate dynamic broker updates (resource "" = the cluster-wide default, else one broker)
        as Kafka does: ConfigError with INVALID_REQUEST for static keys, per-broker keys at the
        cluster level and TLS stores without a listener prefix; keys Kafka does not know are
        accepted (and ignored), as Kafka accepts them."""
        _refuse(sorted(n for n in configs if n in BROKER_CONFIGS and not BROKER_CONFIGS[n].dynamic),
                "Cannot update these configs dynamically: Set({})")
        _refuse(sorted(n for n in configs if n in LISTENER_PREFIX_ONLY),
                "These security configs can be dynamically updated only per-listener using the "
                "listener prefix: HashSet({})")
        if resource_name == "":
            _refuse(sorted(n for n in configs if n in PER_BROKER_ONLY),
                    "Cannot update these configs at default cluster level, broker id must be "
                    "specified: Set({})")
        parsed = {}
        for name, text in configs.items():
            definition = BROKER_CONFIGS.get(name)
            if definition is None:
                if name.startswith(BROKER_PREFIXES) and text is not None:
                    try:
                        check_listener_key(name, text)
                    except ConfigError as exc:
                        raise ConfigError(str(exc), name, ErrorCode.INVALID_REQUEST) from None
                continue
            try:
                parsed[name] = parse_checked(name, definition.type, definition.validator, text)
            except ConfigError as exc:
                raise ConfigError(str(exc), name, ErrorCode.INVALID_REQUEST) from None
        _check_thread_counts(parsed, self.get)
        return parsed

    def set_dynamic(self, cluster_defaults: Mapping[str, str | None],
                    per_broker: Mapping[str, str | None] | None = None):
        """Apply the controller's dynamic broker configs: cluster-wide defaults and this broker's
        own overrides (which win). Keys this version does not know, or bad values, are skipped."""
        self._dynamic_default = self._parse_dynamic(cluster_defaults)
        self._dynamic_broker = self._parse_dynamic(per_broker or {})
        self._dynamic = {**self._dynamic_default, **self._dynamic_broker}
        # per-listener overrides (listener.name.<listener>.<key>), this broker's own winning
        self._dynamic_listener = {name: text for configs in (cluster_defaults, per_broker or {})
                                  for name, text in configs.items()
                                  if name.startswith(BROKER_PREFIXES) and text is not None}
        self._dynamic_texts = (dict(cluster_defaults), dict(per_broker or {}))

    def dynamic_texts(self) -> tuple[dict[str, str | None], dict[str, str | None]]:
        """The dynamic configs as the controller stores them: (cluster-wide, this broker's)."""
        return self._dynamic_texts

    @staticmethod
    def _parse_dynamic(configs: Mapping[str, str | None]) -> dict[str, Any]:
        parsed = {}
        for name, text in configs.items():
            definition = BROKER_CONFIGS.get(name)
            if definition is None or text is None:
                continue
            try:
                parsed[name] = parse_checked(name, definition.type, definition.validator, text)
            except ConfigError:
                continue
        return parsed

    # ---- derived values
    @property
    def node_id(self) -> int:
        node_id = self.get("node.id")
        return node_id if node_id >= 0 else self.get("broker.id")

    @property
    def roles(self) -> list[str]:
        return list(self.get("process.roles"))

    @property
    def protocol_map(self) -> dict[str, str]:
        mapping = _parse_protocol_map(self.get("listener.security.protocol.map"))
        if not self.is_set("listener.security.protocol.map"):
            for name in self.controller_listener_names:  # as Kafka: the default map covers them
                mapping.setdefault(name, "PLAINTEXT")
        return mapping

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self.get("listeners"), self.protocol_map)

    @property
    def controller_listener_names(self) -> list[str]:
        names = self.get("controller.listener.names")
        return [n.strip().upper() for n in names.split(",")] if names else []

    @property
    def quorum_voters(self) -> dict[int, tuple[str, int]]:
        """controller.quorum.voters as {id: (host, port)}; {} when not set."""
        return parse_voters(self.get(VOTERS))

    @property
    def quorum_bootstrap_servers(self) -> list[tuple[str, int]]:
        return parse_bootstrap_servers(self.get(BOOTSTRAP))

    @property
    def multi_node(self) -> bool:
        """Whether this node joins a quorum over the network (else: a quorum of one)."""
        return bool(self.get(VOTERS) or self.get(BOOTSTRAP))

    @property
    def controller_listener(self) -> Listener | None:
        """The listener this node's controller serves (the first of controller.listener.names)."""
        names = self.controller_listener_names
        return next((l for l in self.listeners if names and l.name == names[0]), None)

    @property
    def client_listeners(self) -> list[Listener]:
        controller = set(self.controller_listener_names)
        return [l for l in self.listeners if l.name not in controller]

    def advertised_listeners(self, bound_ports: Mapping[str, int] | None = None) -> list[Listener]:
        """Where clients should connect, per client listener.

        Explicit ``advertised.listeners`` win. Otherwise a listener bound to all interfaces is
        advertised as ``localhost`` (what a client on the same machine can always reach, as Kafka's
        shipped server.properties does), and port 0 is replaced by the port actually bound.
        """
        bound_ports = bound_ports or {}
        explicit = {l.name: l for l in parse_listeners(self.get("advertised.listeners"),
                                                       self.protocol_map, "advertised.listeners")}
        result = []
        for listener in self.client_listeners:
            chosen = explicit.get(listener.name)
            if chosen is None:
                host = listener.host
                if host in ("", "0.0.0.0", "::"):
                    host = "localhost"
                chosen = Listener(listener.name, listener.security_protocol, host, listener.port)
            if chosen.port == 0:
                port = bound_ports.get(listener.name, 0)
                chosen = Listener(chosen.name, chosen.security_protocol, chosen.host, port)
            result.append(chosen)
        return result

    @property
    def log_dirs(self) -> list[str]:
        text = self.get("log.dirs") or self.get("log.dir")
        return [d.strip() for d in text.split(",") if d.strip()]

    @property
    def metadata_log_dir(self) -> str:
        return self.get("metadata.log.dir") or self.log_dirs[0]

    def resolve_synonyms(self, synonyms: Iterable[Synonym]) -> tuple[Any, str | None, ConfigSource]:
        """The first set synonym's value scaled to the topic unit, else the last one's default."""
        synonyms = list(synonyms)
        for synonym in synonyms:
            if self.is_set(synonym.name) and self.get(synonym.name) is not None:
                return self._scaled(synonym), synonym.name, self.source(synonym.name)
        for synonym in reversed(synonyms):
            if BROKER_CONFIGS[synonym.name].default is not None:
                return self._scaled(synonym), synonym.name, ConfigSource.DEFAULT_CONFIG
        return None, None, ConfigSource.DEFAULT_CONFIG

    def _scaled(self, synonym: Synonym):
        value = self.get(synonym.name)
        return value * synonym.scale if synonym.scale != 1 and value is not None else value

    def topic_default(self, name: str) -> Any:
        definition = TOPIC_CONFIGS[name]
        if not definition.synonyms:
            return definition.default
        return self.resolve_synonyms(definition.synonyms)[0]

    def topic_defaults(self) -> dict[str, Any]:
        """Every topic config resolved against this broker's configuration (storage defaults)."""
        return {name: self.topic_default(name) for name in TOPIC_CONFIGS}

    def topic_config(self, overrides: Mapping[str, str]) -> dict[str, Any]:
        """A topic's effective configuration given its (string) overrides from the metadata image."""
        effective = self.topic_defaults()
        for name, text in overrides.items():
            definition = TOPIC_CONFIGS.get(name)
            if definition is None or text is None:
                continue
            try:
                effective[name] = parse_checked(name, definition.type, definition.validator, text)
            except ConfigError:
                continue
        return effective

    # ---- DescribeConfigs
    def _synonym_chain(self, names: Iterable[str], primary: str) -> list[tuple[str, str | None, ConfigSource]]:
        """Kafka's synonym list for `primary` among its broker synonyms `names`: by source first
        (every name's per-broker dynamic value, then cluster default, static, default), then by
        name; everything before the first entry named `primary` is dropped, as Kafka drops it
        (so topic retention.ms lists no log.retention.hours unless log.retention.ms is set)."""
        names = list(names)
        chain = []
        for values, source in ((self._dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                               (self._dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                               (self._static, ConfigSource.STATIC_BROKER_CONFIG)):
            chain += [(name, render(values[name]), source) for name in names if name in values]
        chain += [(name, render(BROKER_CONFIGS[name].default), ConfigSource.DEFAULT_CONFIG)
                  for name in names if BROKER_CONFIGS[name].default is not None]
        for i, (name, _, _) in enumerate(chain):
            if name == primary:
                return chain[i:]
        return []

    def describe_dynamic_defaults(self) -> list[DescribedConfig]:
        """The broker resource "" (cluster-wide dynamic defaults): only what is set."""
        known = [DescribedConfig(name, render(value), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                 False, BROKER_CONFIGS[name].sensitive, BROKER_CONFIGS[name].type,
                                 [(name, render(value), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)])
                 for name, value in sorted(self._dynamic_default.items())]
        return known + self._describe_custom(None, per_broker=False)

    def _describe_custom(self, names: Iterable[str] | None, per_broker: bool) -> list[DescribedConfig]:
        """Keys outside the catalog (a plugin's settings, say), dynamic or static: Kafka keeps them
        and lists them as it lists any key it cannot type, read-only and sensitive with the value
        hidden."""
        cluster_wide, own = self._dynamic_texts
        layers = [(cluster_wide, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
        if per_broker:
            layers.insert(0, (own, ConfigSource.DYNAMIC_BROKER_CONFIG))
            layers.append((self._static_custom, ConfigSource.STATIC_BROKER_CONFIG))
        custom = {name for texts, _ in layers for name, text in texts.items()
                  if text is not None and name not in BROKER_CONFIGS
                  and not name.startswith(BROKER_PREFIXES)}
        if names is not None:
            custom &= set(names)
        entries = []
        for name in sorted(custom):
            synonyms = [(name, None, source) for texts, source in layers
                        if texts.get(name) is not None]
            entries.append(DescribedConfig(name, None, synonyms[0][2], True, True,
                                           ConfigType.UNKNOWN, synonyms))
        return entries

    def describe(self, names: Iterable[str] | None = None) -> list[DescribedConfig]:
        """Broker resource entries (all keys when names is None; names set nowhere are skipped)."""
        if names is not None:
            names = list(names)
        return self._describe_known(names) + self._describe_custom(names, per_broker=True)

    def _describe_known(self, names: list[str] | None) -> list[DescribedConfig]:
        selected = BROKER_CONFIGS if names is None else [n for n in names if n in BROKER_CONFIGS]
        entries = []
        for name in selected:
            definition = BROKER_CONFIGS[name]
            synonyms = self._synonym_chain(_BROKER_SYNONYM_GROUPS.get(name, (name,)), name)
            value = render(self.get(name))
            entries.append(DescribedConfig(
                name=name,
                value=None if definition.sensitive else value,
                source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=not definition.dynamic,
                sensitive=definition.sensitive,
                type=definition.type,
                synonyms=synonyms,
            ))
        return entries

    def describe_topic(self, overrides: Mapping[str, str],
                       names: Iterable[str] | None = None) -> list[DescribedConfig]:
        """Topic resource entries: overrides are DYNAMIC_TOPIC_CONFIG, then broker synonyms."""
        selected = TOPIC_CONFIGS if names is None else [n for n in names if n in TOPIC_CONFIGS]
        entries = []
        for name in selected:
            definition = TOPIC_CONFIGS[name]
            synonyms: list[tuple[str, str | None, ConfigSource]] = []
            if name in overrides:
                synonyms.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
            if definition.synonyms:
                synonyms += self._synonym_chain((s.name for s in definition.synonyms),
                                                definition.synonyms[0].name)
            # Kafka reports the first synonym's source, even when the value came from a synonym
            # its list dropped (flush.ms resolved from a static log.flush.scheduler.interval.ms
            # shows DEFAULT_CONFIG).
            source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
            if name in overrides:
                value = overrides[name]
            elif definition.synonyms:
                value = render(self.resolve_synonyms(definition.synonyms)[0])
            else:
                value = render(definition.default)
            entries.append(DescribedConfig(name, value, source, False, False, definition.type,
                                           synonyms))
        return entries


# A broker key's synonyms, as Kafka groups them (log.retention.ms/minutes/hours, log.roll.*,
# log.roll.jitter.*, log.flush.interval.ms/log.flush.scheduler.interval.ms): the topic catalog's
# multi-key fallbacks.
_BROKER_SYNONYM_GROUPS: dict[str, tuple[str, ...]] = {
    synonym.name: tuple(s.name for s in definition.synonyms)
    for definition in TOPIC_CONFIGS.values() if len(definition.synonyms) > 1
    for synonym in definition.synonyms}


# Thread pools Kafka resizes at runtime: by at most half or double the current size at a time.
THREAD_POOLS = ("num.network.threads", "num.io.threads", "num.replica.fetchers",
                "num.recovery.threads.per.data.dir", "background.threads")


def _check_thread_counts(parsed: Mapping[str, Any], current) -> None:
    for name in THREAD_POOLS:
        new, old = parsed.get(name), current(name)
        if new is None or new == old:
            continue
        if new <= 0:
            problem = "value should be at least 1"
        elif new < old // 2:
            problem = f"value should be at least half the current value {old}"
        elif new > old * 2:
            problem = f"value should not be greater than double the current value {old}"
        else:
            continue
        raise ConfigError("Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread "
                          f"count update validation failed for {name}={new}, {problem} for configuration "
                          "Invalid dynamic configuration", name, ErrorCode.INVALID_REQUEST)


def _refuse(names: list[str], message: str) -> None:
    if names:
        raise ConfigError(message.format(", ".join(names)), names[0], ErrorCode.INVALID_REQUEST)


# ------------------------------------------------------------------------------ properties parsing


def check_listener_key(name: str, text: str) -> None:
    """A `listener.name.<listener>.[<mechanism>.]<key>` value must be valid for <key>, as Kafka
    checks it (ConfigError otherwise); a <key> Kafka does not define is left alone."""
    parts = name.split(".")
    for start in (3, 4):   # after listener.name.<listener>., then after a SASL mechanism too
        definition = BROKER_CONFIGS.get(".".join(parts[start:]))
        if definition is not None:
            parse_checked(name, definition.type, definition.validator, text)
            return
