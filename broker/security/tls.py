"""TLS for listeners (server side) and for the broker's and tools' own connections (client side).

Contexts are built once per listener from Kafka's ``ssl.*`` settings (see ``keystores``). A client's
certificate, when it presents one, becomes its principal through ``ssl.principal.mapping.rules``.
"""

from __future__ import annotations

import ssl

from cryptography import x509

from broker.config import ConfigError

from .keystores import load_keystore, load_truststore
from .principal_mapping import PrincipalMapper

_PROTOCOL_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                      "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


def server_context(settings) -> ssl.SSLContext:
    """The SSLContext of a TLS listener; raises ConfigError for unusable settings."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.options |= ssl.OP_NO_RENEGOTIATION   # tls_connection reads and writes independently
    _restrict(context, settings)
    if not load_keystore(context, settings):
        raise ConfigError(f"listener {settings.listener_name}: a TLS listener needs a key store "
                          "(ssl.keystore.location, or ssl.keystore.certificate.chain + "
                          "ssl.keystore.key with ssl.keystore.type=PEM)", "ssl.keystore.location")
    client_auth = settings.get("ssl.client.auth")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if client_auth != "none" and not load_truststore(context, settings):
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(settings) -> ssl.SSLContext:
    """An SSLContext for connecting to a TLS listener (inter-broker, admin tools)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _restrict(context, settings)
    algorithm = (settings.get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError(f"ssl.endpoint.identification.algorithm {algorithm} is not supported",
                          "ssl.endpoint.identification.algorithm")
    context.check_hostname = algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    if not load_truststore(context, settings):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    load_keystore(context, settings)
    return context


def principal_mapper(settings) -> PrincipalMapper:
    return PrincipalMapper(settings.get("ssl.principal.mapping.rules"))


def subject_name(der_certificate: bytes) -> str:
    """The certificate's subject as Java's X500Principal.getName() writes it (RFC 2253)."""
    return x509.load_der_x509_certificate(der_certificate).subject.rfc4514_string()


def _restrict(context: ssl.SSLContext, settings) -> None:
    versions = []
    for name in settings.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]:
        if name not in _PROTOCOL_VERSIONS:
            raise ConfigError(f"unknown TLS protocol {name}", "ssl.enabled.protocols")
        versions.append(_PROTOCOL_VERSIONS[name])
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    suites = settings.get("ssl.cipher.suites") or []
    tls12 = [openssl_cipher_name(s) for s in suites if not _is_tls13_suite(s)]
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise ConfigError(f"none of ssl.cipher.suites {','.join(suites)} is available",
                              "ssl.cipher.suites") from None
    elif suites and ssl.TLSVersion.TLSv1_3 not in versions:
        raise ConfigError("ssl.cipher.suites lists only TLS 1.3 suites but TLSv1.3 is not enabled",
                          "ssl.cipher.suites")
    # TLS 1.3 suites (TLS_AES_128_GCM_SHA256, ...) cannot be narrowed through Python's ssl module;
    # OpenSSL's defaults are the three AEAD suites every client offers.


def _is_tls13_suite(name: str) -> bool:
    return name in ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                    "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                    "TLS_AES_128_CCM_8_SHA256")


def openssl_cipher_name(name: str) -> str:
    """A Java/IANA suite name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) in OpenSSL's spelling
    (ECDHE-RSA-AES128-GCM-SHA256); OpenSSL names pass through unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, cipher = name[4:].split("_WITH_", 1)
    exchange = "" if exchange == "RSA" else exchange.replace("_", "-") + "-"
    cipher = (cipher.replace("AES_128_", "AES128-").replace("AES_256_", "AES256-")
              .replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305")
              .replace("CBC_", "").replace("_", "-"))
    return exchange + cipher
