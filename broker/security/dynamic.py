"""Per-listener security settings updated at runtime, as Kafka's dynamic listener configs.

Kafka lets AlterConfigs change a listener's TLS key/trust stores and SASL settings
(`listener.name.<listener>.ssl.keystore.location`, `...sasl.jaas.config`, ...) without a restart:
the new settings are checked when they are altered (a store that does not load is refused with
INVALID_REQUEST) and new connections use them; connections already open keep theirs.

- `check_listener_update(config, listeners, resource_configs)`: the alter-time check.
- `reload_listener_security(broker, changed)`: rebuild the listeners whose settings changed.
"""

from __future__ import annotations

import copy
import logging
from typing import Iterable, Mapping

from broker.config import BrokerConfig, ConfigError, Listener
from protocol import ErrorCode

from .listener import ListenerSecurity

log = logging.getLogger("odradek.security")
SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.", "connections.max.reauth.ms")


def _affects(listener: Listener, name: str) -> bool:
    """Whether the setting `name` may change what `listener` secures its connections with."""
    if name.startswith("listener.name."):
        return name.startswith(f"listener.name.{listener.name.lower()}.")
    return name.startswith(SECURITY_PREFIXES)


def check_listener_update(config: BrokerConfig, listeners: Iterable[Listener], cluster_wide: bool,
                          resource_configs: Mapping[str, str | None]) -> None:
    """Raise ConfigError (INVALID_REQUEST) when this broker's dynamic configs (cluster-wide or its
    own) would become `resource_configs` and a secured listener could not be set up with them."""
    changed = [n for n in resource_configs if n.startswith(SECURITY_PREFIXES)]
    if not changed:
        return
    defaults, own = config.dynamic_texts()
    candidate = copy.copy(config)
    if cluster_wide:
        candidate.set_dynamic(dict(resource_configs), own)
    else:
        candidate.set_dynamic(defaults, dict(resource_configs))
    for listener in listeners:
        if listener.security_protocol == "PLAINTEXT" or not any(_affects(listener, n) for n in changed):
            continue
        try:
            ListenerSecurity.for_listener(candidate, listener)
        except (ConfigError, OSError, ValueError) as exc:
            raise ConfigError(f"Validation of dynamic config update of listener {listener.name} "
                              f"failed: {exc}", None, ErrorCode.INVALID_REQUEST) from None


def reload_listener_security(broker, changed: Iterable[str]) -> None:
    """Rebuild the security of every listener a changed setting touches; new connections use it.
    A listener whose new settings do not load keeps its old ones (logged at ERROR)."""
    changed = list(changed)
    for listener in broker.config.client_listeners:
        if listener.security_protocol == "PLAINTEXT" or not any(_affects(listener, n) for n in changed):
            continue
        try:
            broker.listener_security[listener.name] = ListenerSecurity.for_listener(broker.config, listener)
        except (ConfigError, OSError, ValueError) as exc:
            log.error("listener %s keeps its previous security settings: the new ones do not "
                      "load: %s", listener.name, exc)
            continue
        log.info("listener %s: security settings reloaded (%s)", listener.name,
                 ", ".join(sorted(n for n in changed if _affects(listener, n))))
