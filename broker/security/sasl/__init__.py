"""Server sides of the SASL mechanisms Kafka brokers offer: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER.

Each mechanism is a small sans-IO state machine: ``evaluate(token) -> challenge`` until ``complete``,
then ``principal_name`` says who authenticated (``token_authenticated``: with a delegation token)
and ``credential_expiry_ms`` (wall clock, or None) when the credential itself expires (an OAuth
token's ``exp``, a delegation token's expiry; KIP-368 caps the session there).
``AuthenticationFailed`` carries the message the client is shown (Kafka's wording, never a secret).
"""

from __future__ import annotations


class AuthenticationFailed(Exception):
    """The client's credentials were refused; ``str(exc)`` is what the client is told."""


def generic_failure(mechanism: str) -> AuthenticationFailed:
    """Kafka's answer when a mechanism fails without a message of its own."""
    return AuthenticationFailed("Authentication failed during authentication due to invalid "
                                f"credentials with SASL mechanism {mechanism}")


class SaslServer:
    mechanism = ""

    def __init__(self):
        self.complete = False
        self.principal_name: str | None = None
        self.credential_expiry_ms: int | None = None
        self.token_authenticated = False   # SCRAM with a delegation token (tokenauth=true)

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError
