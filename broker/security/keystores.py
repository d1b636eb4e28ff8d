"""Key stores and trust stores in Kafka's formats, loaded into an ``ssl.SSLContext``.

``ssl.keystore.type`` PEM (a file with the private key and certificate chain, or the inline
``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``; ``ssl.key.password`` decrypts the key) or
PKCS12 (``ssl.keystore.location`` + ``ssl.keystore.password``, read with ``cryptography``). Trust
stores: PEM (file or inline ``ssl.truststore.certificates``) or PKCS12. JKS, Java's own format, is
not readable outside Java: converting it (``keytool -importkeystore -deststoretype PKCS12``) is the way.

Python's ``ssl`` loads keys only from files, so key material that is not already a PEM file on disk
goes through an anonymous in-memory file (``memfd_create``): private keys never touch the disk.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from broker.config import ConfigError


def load_keystore(context: ssl.SSLContext, settings, config_prefix: str = "") -> bool:
    """Load the key and certificate chain the settings name; False when none is configured."""
    store_type = (settings.get("ssl.keystore.type") or "JKS").upper()
    location = settings.get("ssl.keystore.location")
    chain = settings.get("ssl.keystore.certificate.chain")
    inline_key = settings.get("ssl.keystore.key")
    key_password = settings.get("ssl.key.password")
    if chain or inline_key:
        if store_type != "PEM":
            raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key need "
                              "ssl.keystore.type=PEM", "ssl.keystore.type")
        if not (chain and inline_key):
            raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key must be set "
                              "together", "ssl.keystore.key")
        if location:
            raise ConfigError("set either ssl.keystore.location or the inline PEM key store, "
                              "not both", "ssl.keystore.location")
        key = _pem_private_key(inline_key.encode(), key_password)
        _load_chain(context, _normalize_pem(chain).encode() + key)
        return True
    if not location:
        return False
    data = _read(location, "ssl.keystore.location")
    if store_type == "PEM":
        key = _pem_private_key(data, key_password)
        certificates = b"".join(c.public_bytes(serialization.Encoding.PEM)
                                for c in x509.load_pem_x509_certificates(data))
        _load_chain(context, certificates + key)
    elif store_type == "PKCS12":
        password = settings.get("ssl.keystore.password")
        try:
            private_key, certificate, extra = pkcs12.load_key_and_certificates(
                data, password.encode() if password else None)
        except ValueError as exc:
            raise ConfigError(f"cannot read PKCS12 key store {location}: {exc}",
                              "ssl.keystore.location") from None
        if private_key is None or certificate is None:
            raise ConfigError(f"PKCS12 key store {location} holds no private key and certificate",
                              "ssl.keystore.location")
        pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [certificate, *extra])
        _load_chain(context, pem + _unencrypted_pem(private_key))
    else:
        raise ConfigError(f"ssl.keystore.type {store_type} is not supported (use PKCS12 or PEM)",
                          "ssl.keystore.type")
    return True


def load_truststore(context: ssl.SSLContext, settings) -> bool:
    """Trust the CAs the settings name; False when no trust store is configured."""
    store_type = (settings.get("ssl.truststore.type") or "JKS").upper()
    inline = settings.get("ssl.truststore.certificates")
    location = settings.get("ssl.truststore.location")
    if inline:
        if store_type != "PEM":
            raise ConfigError("ssl.truststore.certificates needs ssl.truststore.type=PEM",
                              "ssl.truststore.type")
        context.load_verify_locations(cadata=_normalize_pem(inline))
        return True
    if not location:
        return False
    data = _read(location, "ssl.truststore.location")
    if store_type == "PEM":
        try:
            certificates = x509.load_pem_x509_certificates(data)
        except ValueError as exc:
            raise ConfigError(f"cannot read PEM trust store {location}: {exc}",
                              "ssl.truststore.location") from None
    elif store_type == "PKCS12":
        password = settings.get("ssl.truststore.password")
        try:
            store = pkcs12.load_pkcs12(data, password.encode() if password else None)
        except ValueError as exc:
            raise ConfigError(f"cannot read PKCS12 trust store {location}: {exc}",
                              "ssl.truststore.location") from None
        certificates = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certificates.append(store.cert.certificate)
    else:
        raise ConfigError(f"ssl.truststore.type {store_type} is not supported (use PKCS12 or PEM)",
                          "ssl.truststore.type")
    if not certificates:
        raise ConfigError(f"trust store {location} holds no certificate", "ssl.truststore.location")
    context.load_verify_locations(cadata="".join(
        c.public_bytes(serialization.Encoding.PEM).decode() for c in certificates))
    return True


def _read(path: str, config_name: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {config_name} {path}: {exc.strerror}", config_name) from None


def _normalize_pem(text: str) -> str:
    """Inline PEM in a properties file often loses its line breaks; rebuild each block."""
    blocks = _PEM_BLOCK.findall(text)
    if not blocks:
        raise ConfigError("inline PEM value holds no -----BEGIN ...----- block", "ssl.keystore.key")
    out = []
    for label, body in blocks:
        body = "".join(body.split())
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        out.append(f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n")
    return "".join(out)


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def _pem_private_key(data: bytes, password: str | None) -> bytes:
    try:
        key = serialization.load_pem_private_key(data, password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"cannot read the key store's private key: {exc}",
                          "ssl.key.password") from None
    return _unencrypted_pem(key)


def _unencrypted_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _load_chain(context: ssl.SSLContext, pem: bytes) -> None:
    with _in_memory_file(pem) as path:
        try:
            context.load_cert_chain(path)
        except ssl.SSLError as exc:
            raise ConfigError(f"key store rejected: {exc}", "ssl.keystore.location") from None


@contextlib.contextmanager
def _in_memory_file(data: bytes):
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("odradek-keystore", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile() as handle:   # 0600, deleted on close
        handle.write(data)
        handle.flush()
        yield handle.name
