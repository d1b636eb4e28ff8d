"""SASL/PLAIN (RFC 4616): ``authzid NUL authcid NUL password``, users from the listener's JAAS
options ``user_<name>="<password>"`` (Kafka's PlainLoginModule on the broker)."""

from __future__ import annotations

import hmac

from . import AuthenticationFailed, SaslServer, generic_failure


class PlainServer(SaslServer):
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]):
        super().__init__()
        self._users = users

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise generic_failure(self.mechanism)
        parts = bytes(token).split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise generic_failure(self.mechanism) from None
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare even for an unknown user, so timing does not tell which users exist
        matches = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        if expected is None or not matches:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        self.principal_name = username
        self.complete = True
        return b""


def plain_users(jaas_options: dict[str, str]) -> dict[str, str]:
    return {key[5:]: value for key, value in jaas_options.items() if key.startswith("user_")}
