"""Who a request comes from: Kafka's ``KafkaPrincipal`` ("User:alice").

The connection holds its authenticated principal (``Connection.principal``, ANONYMOUS until a
listener's authentication sets it) and each request's context exposes it as ``ctx.principal``
with the client's address as ``ctx.client_host``; the authorizer matches ACLs against both.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """"User:alice" -> KafkaPrincipal("User", "alice"); the name may itself hold colons."""
        if text is None:
            raise ValueError("principal must not be null")
        principal_type, sep, name = text.partition(":")
        if not sep:   # Kafka only requires the separator
            raise ValueError(f"expected a principal of the form Type:name, got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
WILDCARD_PRINCIPAL = KafkaPrincipal(USER_TYPE, "*")
