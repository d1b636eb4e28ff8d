"""Per-listener security settings updated at runtime, as Kafka's dynamic listener configs.

Kafka lets AlterConfigs change a listener's TLS key/trust stores and SASL settings
(`listener.name.<listener>.ssl.keystore.location`, `...sasl.jaas.config`, ...) without a restart:
the new settings are checked when they are altered (a store that does not load, or one whose
certificate names another subject or other alternative names than the one served, unless
`ssl.allow.dn.changes` / `ssl.allow.san.changes`, is refused with INVALID_REQUEST) and new
connections use them; connections already open keep theirs.

- `check_listener_update(config, current, cluster_wide, resource_configs)`: the alter-time check.
- `reload_listener_security(broker, changed)`: rebuild the listeners whose settings changed.
"""

from __future__ import annotations

import copy
import logging
import ssl
from typing import Iterable, Mapping

from cryptography import x509

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


def check_listener_update(config: BrokerConfig, current: Mapping[str, ListenerSecurity | None],
                          cluster_wide: bool, resource_configs: Mapping[str, str | None]) -> None:
    """Raise ConfigError (INVALID_REQUEST) when this broker's dynamic configs (cluster-wide or its
    own) would become `resource_configs` and a secured listener could not be set up with them, or
    its new certificate is not compatible with the one served (`current`: name -> security)."""
    changed = [n for n in resource_configs if n.startswith(SECURITY_PREFIXES)]
    if not changed:
        return
    defaults, own = config.dynamic_texts()
    candidate = copy.copy(config)
    if cluster_wide:
        candidate.set_dynamic(dict(resource_configs), own)
    else:
        candidate.set_dynamic(defaults, dict(resource_configs))
    for listener in candidate.client_listeners:
        if listener.security_protocol == "PLAINTEXT" or not any(_affects(listener, n) for n in changed):
            continue
        try:
            proposed = ListenerSecurity.for_listener(candidate, listener)
        except (ConfigError, OSError, ValueError) as exc:
            raise ConfigError(f"Validation of dynamic config update of listener {listener.name} "
                              f"failed: {exc}", None, ErrorCode.INVALID_REQUEST) from None
        served = current.get(listener.name)
        if served is not None and served.uses_tls and proposed is not None and proposed.uses_tls:
            _check_same_identity(listener, served, proposed)


def _check_same_identity(listener: Listener, served: ListenerSecurity, proposed: ListenerSecurity) -> None:
    """Kafka's key store update rule: the new certificate keeps the subject and the alternative
    names of the one served, unless ssl.allow.dn.changes / ssl.allow.san.changes say otherwise."""
    old, new = _served_certificate(served.ssl_context), _served_certificate(proposed.ssl_context)
    if old is None or new is None:
        return
    if not proposed.settings.get("ssl.allow.dn.changes") and old.subject != new.subject:
        raise ConfigError(f"Validation of dynamic config update of listener {listener.name} failed: "
                          f"Keystore DistinguishedName does not match: existing={old.subject.rfc4514_string()}, "
                          f"new={new.subject.rfc4514_string()}", None, ErrorCode.INVALID_REQUEST)
    if not proposed.settings.get("ssl.allow.san.changes") and _alt_names(old) != _alt_names(new):
        raise ConfigError(f"Validation of dynamic config update of listener {listener.name} failed: "
                          f"Keystore SubjectAltNames do not match: existing={sorted(_alt_names(old))}, "
                          f"new={sorted(_alt_names(new))}", None, ErrorCode.INVALID_REQUEST)


def _alt_names(certificate: x509.Certificate) -> set[str]:
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return {str(name.value) for name in extension.value}


def _served_certificate(context: ssl.SSLContext) -> x509.Certificate | None:
    """The certificate a server context presents, read from an in-memory handshake with itself."""
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_context.check_hostname = False
    client_context.verify_mode = ssl.CERT_NONE
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(to_client, to_server)
    server = context.wrap_bio(to_server, to_client, server_side=True)
    for _ in range(8):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                break
        der = client.getpeercert(binary_form=True) if client.version() else None
        if der:
            return x509.load_der_x509_certificate(der)
    return None


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
