"""Development and test certificates made on the spot with ``cryptography``: a CA, server and
client certificates, and the bad ones (expired, signed by another CA, for another host name)."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str, ou: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
             x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Odradek Tests")]
    if ou:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    parts.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(parts)


@dataclass
class Issued:
    key: object
    cert: x509.Certificate

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: str | None = None) -> bytes:
        encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8, encryption)


class CertificateAuthority:
    def __init__(self, name: str = "Odradek Test CA"):
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder()
                     .subject_name(_name(name)).issuer_name(_name(name))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                                  False, False), critical=True)
                     .sign(self.key, hashes.SHA256()))

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, cn: str, *, ou: str | None = None, hosts=("localhost", "127.0.0.1"),
              server: bool = True, expired: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        if expired:
            start, end = now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)
        else:
            start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=10)
        builder = (x509.CertificateBuilder()
                   .subject_name(_name(cn, ou)).issuer_name(self.cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(
                       [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False))
        if hosts:
            names = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return Issued(key, builder.sign(self.key, hashes.SHA256()))


@dataclass
class TestPki:
    """Files under `directory`: ca.pem, server.pem (key + chain), client.pem/key, ..."""

    directory: str
    ca: CertificateAuthority
    server: Issued
    client: Issued

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)


def make_pki(directory) -> TestPki:
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    ca = CertificateAuthority()
    server = ca.issue("broker")
    client = ca.issue("alice", ou="ServiceUsers", hosts=(), server=False)
    other_ca = CertificateAuthority("Some Other CA")
    files = {
        "ca.pem": ca.cert_pem(),
        "server.pem": server.key_pem() + server.cert_pem() + ca.cert_pem(),
        "server-cert.pem": server.cert_pem() + ca.cert_pem(),
        "server-key.pem": server.key_pem(),
        "server-key-encrypted.pem": server.key_pem("keypass"),
        "client-cert.pem": client.cert_pem(),
        "client-key.pem": client.key_pem(),
        "other-ca.pem": other_ca.cert_pem(),
    }
    bad = {"expired": ca.issue("broker", expired=True),
           "wrong-ca": other_ca.issue("broker"),
           "wrong-host": ca.issue("broker", hosts=("elsewhere.example",))}
    for label, issued in bad.items():
        files[f"server-{label}.pem"] = issued.key_pem() + issued.cert_pem()
    files["server.p12"] = pkcs12.serialize_key_and_certificates(
        b"broker", server.key, server.cert, [ca.cert],
        serialization.BestAvailableEncryption(b"storepass"))
    files["truststore.p12"] = pkcs12.serialize_key_and_certificates(
        None, None, None, [ca.cert], serialization.BestAvailableEncryption(b"storepass"))
    files["client.p12"] = pkcs12.serialize_key_and_certificates(
        b"alice", client.key, client.cert, [ca.cert],
        serialization.BestAvailableEncryption(b"storepass"))
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as handle:
            handle.write(data)
    return TestPki(directory, ca, server, client)
