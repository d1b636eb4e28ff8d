"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): the server side and the shared formulas.

Credentials live in the metadata log (UserScramCredentialRecord: salt, StoredKey, ServerKey,
iterations), never the password. The exchange:

    client-first   n,[a=authzid],n=user,r=cnonce[,ext]
    server-first   r=cnonce+snonce,s=salt,i=iterations
    client-final   c=base64(gs2 header),r=cnonce+snonce[,ext],p=proof
    server-final   v=server signature
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Callable

from . import AuthenticationFailed, SaslServer, generic_failure

MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}   # name -> (hash, type id)
MECHANISM_BY_TYPE = {type_id: name for name, (_, type_id) in MECHANISMS.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hash(mechanism: str) -> str:
    return MECHANISMS[mechanism][0]


def hmac_digest(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _hash(mechanism)).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    client_key = hmac_digest(mechanism, salted, b"Client Key")
    stored_key = hashlib.new(_hash(mechanism), client_key).digest()
    server_key = hmac_digest(mechanism, salted, b"Server Key")
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def saslname_decode(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ValueError("invalid escape in SCRAM user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def saslname_encode(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<user>[^,]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?P<ext>(?:,[a-zA-Z0-9]+=[^,]*)*))")
_CLIENT_FINAL = re.compile(
    r"(?P<without_proof>c=(?P<binding>[A-Za-z0-9+/=]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?:,[a-zA-Z0-9]+=[^,]*)*),p=(?P<proof>[A-Za-z0-9+/=]+)")


TokenLookup = Callable[[str, str], "tuple[str, ScramCredential, int] | None"]


class ScramServer(SaslServer):
    """`lookup(user, mechanism)` finds a user's credential; `token_lookup(token id, mechanism)` a
    delegation token's (owner name, credential, expiry ms) when the client sends tokenauth=true."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None],
                 token_lookup: TokenLookup | None = None):
        super().__init__()
        self.mechanism = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._step = 0
        self._credential: ScramCredential | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise generic_failure(self.mechanism) from None
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise generic_failure(self.mechanism)

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if not match:
            raise generic_failure(self.mechanism)
        try:
            user = saslname_decode(match["user"])
        except ValueError:
            raise generic_failure(self.mechanism) from None
        extensions = dict(item.split("=", 1) for item in match["ext"].split(",") if item)
        principal_name = user
        if extensions.get("tokenauth", "false").lower() == "true":
            token = self._token_lookup and self._token_lookup(user, self.mechanism)
            if not token:
                raise generic_failure(self.mechanism)
            principal_name, credential, self.credential_expiry_ms = token
            self.token_authenticated = True
        else:
            credential = self._lookup(user, self.mechanism)
        if credential is None:   # Kafka does not tell an unknown user from a wrong password
            raise generic_failure(self.mechanism)
        if match["authzid"] and saslname_decode(match["authzid"]) != user:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        self._principal_name, self._credential = principal_name, credential
        self._nonce = match["nonce"] + secrets.token_urlsafe(24)
        self._gs2_header = text[:match.start("bare")]
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._client_first_bare = match["bare"]
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        # Kafka accepts a nonce that ends with ours: librdkafka 2.0 sends its own nonce twice
        if not match or not match["nonce"].endswith(self._nonce):
            raise generic_failure(self.mechanism)
        try:
            binding = base64.b64decode(match["binding"], validate=True)
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            raise generic_failure(self.mechanism) from None
        if binding != self._gs2_header.encode():
            raise generic_failure(self.mechanism)
        credential = self._credential
        auth_message = (f"{self._client_first_bare},{self._server_first},"
                        f"{match['without_proof']}").encode()
        client_signature = hmac_digest(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise generic_failure(self.mechanism)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        computed = hashlib.new(_hash(self.mechanism), client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise generic_failure(self.mechanism)
        server_signature = hmac_digest(self.mechanism, credential.server_key, auth_message)
        self._step = 2
        self.principal_name = self._principal_name
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side (the admin tools and the broker's own connections)."""

    def __init__(self, mechanism: str, username: str, password: str, *,
                 token_auth: bool = False):
        self.mechanism, self.username, self.password = mechanism, username, password
        self.token_auth = token_auth   # a delegation token: id as username, HMAC as password
        self._nonce = secrets.token_urlsafe(24)

    def first_message(self) -> bytes:
        extension = ",tokenauth=true" if self.token_auth else ""
        self._client_first_bare = f"n={saslname_encode(self.username)},r={self._nonce}{extension}"
        return ("n,," + self._client_first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(","))
        nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        if not nonce.startswith(self._nonce) or iterations < MIN_ITERATIONS:
            raise AuthenticationFailed("invalid SCRAM server-first message")
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = hmac_digest(self.mechanism, salted, b"Client Key")
        stored_key = hashlib.new(_hash(self.mechanism), client_key).digest()
        signature = hmac_digest(self.mechanism, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac_digest(self.mechanism, salted, b"Server Key")
        self._expected_server = hmac_digest(self.mechanism, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        text = server_final.decode()
        if not text.startswith("v=") or not hmac.compare_digest(
                base64.b64decode(text[2:]), self._expected_server):
            raise AuthenticationFailed("invalid SCRAM server signature")
