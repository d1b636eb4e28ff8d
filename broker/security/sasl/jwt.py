"""JSON Web Tokens as Kafka's OAUTHBEARER validators check them.

``UnsecuredValidator`` is Kafka's default (development) validator: a JWS with ``"alg": "none"`` and
no signature, its principal in ``sub`` (option ``unsecuredValidatorPrincipalClaimName``).
``JwksValidator`` checks signed tokens (RS256/384/512, ES256/384/512) against the keys of a JWKS
(``sasl.oauthbearer.jwks.endpoint.url``: an https:/http: endpoint, a ``file:`` URL or a path), plus
expected audience and issuer and the clock skew, as Kafka's OAuthBearerValidatorCallbackHandler does.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from broker.config import ConfigError

log = logging.getLogger("odradek.security.oauthbearer")


class InvalidToken(Exception):
    """``status`` is RFC 7628's error status (invalid_token, insufficient_scope)."""

    def __init__(self, message: str, status: str = "invalid_token", scope: str | None = None):
        super().__init__(message)
        self.status, self.scope = status, scope


@dataclass(frozen=True)
class ValidatedToken:
    principal_name: str
    expiry_ms: int
    scope: tuple[str, ...]


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _split(token: str) -> tuple[dict, dict, bytes, bytes]:
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("token must have 3 dot-separated parts")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except (ValueError, UnicodeDecodeError):
        raise InvalidToken("token is not base64url-encoded JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise InvalidToken("token header and claims must be JSON objects")
    return header, claims, f"{parts[0]}.{parts[1]}".encode(), signature


def _number(claims: dict, name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise InvalidToken(f"required claim {name} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"claim {name} must be a number")
    return float(value)


def _scope(claims: dict, name: str) -> tuple[str, ...]:
    value = claims.get(name)
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InvalidToken(f"claim {name} must be a string or a list of strings")


def _check_times(claims: dict, skew_s: float, now: float) -> int:
    exp = _number(claims, "exp", True)
    iat = _number(claims, "iat", False)
    nbf = _number(claims, "nbf", False)
    if exp + skew_s < now:
        raise InvalidToken("the token has expired")
    if iat is not None and iat - skew_s > now:
        raise InvalidToken("the token was issued in the future")
    if nbf is not None and nbf - skew_s > now:
        raise InvalidToken("the token is not valid yet")
    if iat is not None and exp <= iat:
        raise InvalidToken("the token expires before it was issued")
    return int(exp * 1000)


def _principal(claims: dict, name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidToken(f"required claim {name} is missing or empty")
    return value


class UnsecuredValidator:
    def __init__(self, options: dict[str, str]):
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self.required_scope = tuple(options.get("unsecuredValidatorRequiredScope", "").split())
        try:
            self.skew_s = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0")) / 1000
        except ValueError:
            raise ConfigError("unsecuredValidatorAllowableClockSkewMs must be a number",
                              "sasl.jaas.config") from None

    def validate(self, token: str, now: float | None = None) -> ValidatedToken:
        header, claims, _, _ = _split(token)
        if header.get("alg") != "none":
            raise InvalidToken("unsecured tokens must have alg none")
        now = time.time() if now is None else now
        expiry = _check_times(claims, self.skew_s, now)
        scope = _scope(claims, self.scope_claim)
        missing = [s for s in self.required_scope if s not in scope]
        if missing:
            raise InvalidToken(f"the token lacks the required scope {' '.join(missing)}",
                               status="insufficient_scope", scope=" ".join(self.required_scope))
        return ValidatedToken(_principal(claims, self.principal_claim), expiry, scope)


_RSA_HASHES = {"RS256": hashes.SHA256, "RS384": hashes.SHA384, "RS512": hashes.SHA512}
_EC_HASHES = {"ES256": (hashes.SHA256, 32), "ES384": (hashes.SHA384, 48),
              "ES512": (hashes.SHA512, 66)}
_CURVES = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}


class JwksValidator:
    def __init__(self, settings, mechanism: str = "OAUTHBEARER"):
        def get(key):
            return settings.for_mechanism(mechanism, key)
        self.url = get("sasl.oauthbearer.jwks.endpoint.url")
        self.audience = tuple(get("sasl.oauthbearer.expected.audience") or ())
        self.issuer = get("sasl.oauthbearer.expected.issuer")
        self.skew_s = get("sasl.oauthbearer.clock.skew.seconds")
        self.sub_claim = get("sasl.oauthbearer.sub.claim.name")
        self.scope_claim = get("sasl.oauthbearer.scope.claim.name")
        self._keys: dict[str | None, object] = {}
        if urllib.parse.urlparse(self.url).scheme in ("http", "https"):
            self._source = HttpJwks(self.url, get("sasl.oauthbearer.jwks.endpoint.refresh.ms"))
        else:
            self._source = FileJwks(self.url)
        self._reload()

    def _reload(self, unknown_kid: str | None = None) -> None:
        document = self._source.changed(unknown_kid)
        if document is None:
            return
        keys = {}
        for jwk in document.get("keys", []) if isinstance(document, dict) else []:
            try:
                keys[jwk.get("kid")] = _public_key(jwk)
            except (KeyError, ValueError, TypeError, AttributeError):
                continue   # a key type we do not use; Kafka skips those too
        self._keys = keys

    def validate(self, token: str, now: float | None = None) -> ValidatedToken:
        header, claims, signed, signature = _split(token)
        algorithm = header.get("alg")
        if algorithm not in _RSA_HASHES and algorithm not in _EC_HASHES:
            raise InvalidToken(f"unsupported signature algorithm {algorithm}")
        kid = header.get("kid")
        self._reload()   # a newer key set, if the file changed or a refresh came back
        key = self._keys.get(kid)
        if key is None:
            self._reload(unknown_kid=str(kid))   # keys rotate: look again (or ask again) first
            key = self._keys.get(kid)
            if key is None and kid is None and len(self._keys) == 1:
                key = next(iter(self._keys.values()))
        if key is None:
            raise InvalidToken(f"no key with kid {kid} in the JWKS")
        _verify(key, algorithm, signed, signature)
        now = time.time() if now is None else now
        expiry = _check_times(claims, self.skew_s, now)
        if self.issuer and claims.get("iss") != self.issuer:
            raise InvalidToken("unexpected issuer")
        if self.audience:
            audience = claims.get("aud")
            audience = [audience] if isinstance(audience, str) else audience or []
            if not set(self.audience) & set(audience):
                raise InvalidToken("unexpected audience")
        return ValidatedToken(_principal(claims, self.sub_claim), expiry,
                              _scope(claims, self.scope_claim))


class FileJwks:
    """A local JWKS file (``file:`` URL or path), read again whenever it changes."""

    def __init__(self, url: str):
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("file", ""):
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url {url}: use an https:, http: "
                              "or file: URL", "sasl.oauthbearer.jwks.endpoint.url")
        self.url = url
        self.path = urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else url
        self._mtime = None

    def changed(self, unknown_kid: str | None = None):
        try:
            mtime = os.stat(self.path).st_mtime_ns
            if mtime == self._mtime:
                return None
            with open(self.path, encoding="utf-8") as handle:
                document = json.load(handle)
        except (OSError, ValueError) as exc:
            if self._mtime is None:
                raise ConfigError(f"cannot read JWKS {self.url}: {exc}",
                                  "sasl.oauthbearer.jwks.endpoint.url") from None
            return None   # keep the keys we have; the file is being rewritten
        self._mtime = mtime
        return document


class HttpJwks:
    """A JWKS endpoint, fetched at start-up and then refreshed off the event loop: every
    ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, and when a token names a key we do not have
    (that token fails; the client's retry finds the new key). As in Kafka, one missing key id
    asks again at most every MISSING_KID_RETRY_S, so forged key ids cannot hammer the endpoint."""

    MISSING_KID_RETRY_S = 60.0
    FAILED_RETRY_S = 10.0
    MAX_MISSING_KIDS = 1000
    TIMEOUT_S = 10.0

    def __init__(self, url: str, refresh_ms: int):
        self.url = url
        self.refresh_s = refresh_ms / 1000
        self._fetched: dict | None = None
        self._next_refresh = 0.0   # monotonic
        self._lock = threading.Lock()
        self._running = False
        self._missing: dict[str, float] = {}   # key id -> when we last asked for it
        try:
            self._store(self._fetch())
        except (OSError, ValueError) as exc:   # the identity provider may be down: not fatal
            log.warning("cannot fetch JWKS %s (%s); will retry", url, exc)
            self._next_refresh = time.monotonic() + self.FAILED_RETRY_S

    def _fetch(self) -> dict:
        with urllib.request.urlopen(self.url, timeout=self.TIMEOUT_S) as response:
            return json.loads(response.read(1 << 20))

    def _store(self, document) -> None:
        with self._lock:
            self._fetched = document
            self._next_refresh = time.monotonic() + self.refresh_s

    def changed(self, unknown_kid: str | None = None):
        with self._lock:
            document, self._fetched = self._fetched, None
            now = time.monotonic()
            due = now >= self._next_refresh
            if unknown_kid is not None and \
                    now - self._missing.get(unknown_kid, -self.MISSING_KID_RETRY_S) \
                    >= self.MISSING_KID_RETRY_S:
                if len(self._missing) >= self.MAX_MISSING_KIDS:
                    self._missing.clear()
                self._missing[unknown_kid] = now
                due = True
            if due and not self._running:
                self._running = True
                threading.Thread(target=self._refresh, name="jwks-refresh", daemon=True).start()
        return document

    def _refresh(self) -> None:
        try:
            self._store(self._fetch())
        except (OSError, ValueError) as exc:
            log.warning("cannot refresh JWKS %s: %s", self.url, exc)
            with self._lock:
                self._next_refresh = time.monotonic() + self.FAILED_RETRY_S
        finally:
            with self._lock:
                self._running = False


def _int(text: str) -> int:
    return int.from_bytes(b64url_decode(text), "big")


def _public_key(jwk: dict):
    if jwk["kty"] == "RSA":
        return rsa.RSAPublicNumbers(_int(jwk["e"]), _int(jwk["n"])).public_key()
    if jwk["kty"] == "EC":
        curve = _CURVES[jwk["crv"]]()
        return ec.EllipticCurvePublicNumbers(_int(jwk["x"]), _int(jwk["y"]), curve).public_key()
    raise ValueError(f"key type {jwk['kty']}")


def _verify(key, algorithm: str, signed: bytes, signature: bytes) -> None:
    try:
        if algorithm in _RSA_HASHES:
            if not isinstance(key, rsa.RSAPublicKey):
                raise InvalidToken("the key does not match the token's algorithm")
            key.verify(signature, signed, padding.PKCS1v15(), _RSA_HASHES[algorithm]())
        else:
            digest, size = _EC_HASHES[algorithm]
            if not isinstance(key, ec.EllipticCurvePublicKey) or len(signature) != 2 * size:
                raise InvalidToken("the key does not match the token's algorithm")
            der = encode_dss_signature(int.from_bytes(signature[:size], "big"),
                                       int.from_bytes(signature[size:], "big"))
            key.verify(der, signed, ec.ECDSA(digest()))
    except InvalidSignature:
        raise InvalidToken("the token's signature does not verify") from None
