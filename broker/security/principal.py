"""Who a connection is: Kafka's ``KafkaPrincipal`` ("User:alice").

Authentication (TLS client certificates, SASL) sets the principal of a connection; the authorizer
reads it. A connection nobody authenticated (PLAINTEXT, SSL without a client certificate) is
``User:ANONYMOUS``, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    # logged in with a delegation token (its owner): such a session may not manage tokens.
    # Not part of equality, as in Kafka: ACLs and token ownership match the owner either way.
    token_authenticated: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def user(cls, name: str, *, token_authenticated: bool = False) -> "KafkaPrincipal":
        return cls(USER_TYPE, name, token_authenticated)

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """"User:alice" -> KafkaPrincipal("User", "alice"); raises ValueError without a type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"expected a principal like User:name, got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
