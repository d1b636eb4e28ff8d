"""Signed JWTs for OAUTHBEARER tests: an RSA and an EC key published in a JWKS file."""

from __future__ import annotations

import base64
import json
import os
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(value: int, size: int | None = None) -> str:
    size = size or (value.bit_length() + 7) // 8
    return b64url(value.to_bytes(size, "big"))


class TokenIssuer:
    issuer = "https://issuer.odradek.test"

    def __init__(self, directory):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        rsa_numbers = self.rsa.public_key().public_numbers()
        ec_numbers = self.ec.public_key().public_numbers()
        jwks = {"keys": [
            {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256",
             "n": _int(rsa_numbers.n), "e": _int(rsa_numbers.e)},
            {"kty": "EC", "kid": "ec-1", "use": "sig", "alg": "ES256", "crv": "P-256",
             "x": _int(ec_numbers.x, 32), "y": _int(ec_numbers.y, 32)},
        ]}
        self.jwks_path = os.path.join(os.fspath(directory), "jwks.json")
        with open(self.jwks_path, "w") as handle:
            json.dump(jwks, handle)

    def token(self, subject: str = "carol", *, algorithm: str = "RS256", lifetime: int = 3600,
              audience="odradek", issuer: str | None = None, signer=None, kid=None,
              issued_at: float | None = None) -> str:
        now = int(time.time() if issued_at is None else issued_at)
        claims = {"sub": subject, "iat": now, "exp": now + lifetime, "aud": audience,
                  "iss": issuer or self.issuer, "scope": "kafka"}
        kid = kid or ("rsa-1" if algorithm == "RS256" else "ec-1")
        header = {"alg": algorithm, "typ": "JWT", "kid": kid}
        signed = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        if algorithm == "RS256":
            key = signer or self.rsa
            signature = key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
        else:
            der = (signer or self.ec).sign(signed.encode(), ec.ECDSA(hashes.SHA256()))
            r, s = decode_dss_signature(der)
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signed}.{b64url(signature)}"


def unsecured_token(subject: str, lifetime: int = 3600) -> str:
    now = int(time.time())
    claims = {"sub": subject, "iat": now, "exp": now + lifetime}
    header = b64url(json.dumps({"alg": "none"}).encode())
    return f"{header}.{b64url(json.dumps(claims).encode())}."
