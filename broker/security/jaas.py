"""Kafka's ``sasl.jaas.config`` values: one or more JAAS login module entries.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

Grammar (as Java's ConfigFile parser reads it): ``<class> <flag> (<key>=<value>)* ;`` repeated, where a
value is a double-quoted string (``\\`` escapes the next character) or a bare token, and comments
(``/* */``, ``//``, ``#``) are skipped. Kafka requires exactly one entry in ``sasl.jaas.config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    """A ``sasl.jaas.config`` that does not parse."""


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas_config(text: str) -> list[LoginModule]:
    tokens = _tokenize(text)
    modules, pos = [], 0
    while pos < len(tokens):
        kind, class_name = tokens[pos]
        if kind != "word":
            raise JaasError(f"expected a login module class name, got {class_name!r}")
        if pos + 1 >= len(tokens) or tokens[pos + 1][0] != "word" \
                or tokens[pos + 1][1].lower() not in FLAGS:
            raise JaasError(f"login module {class_name}: expected a control flag "
                            f"({'/'.join(FLAGS)})")
        flag = tokens[pos + 1][1].lower()
        pos += 2
        options: dict[str, str] = {}
        while True:
            if pos >= len(tokens):
                raise JaasError(f"login module {class_name}: missing ';' at the end")
            kind, value = tokens[pos]
            if kind == ";":
                pos += 1
                break
            if kind != "word" or pos + 2 >= len(tokens) or tokens[pos + 1][0] != "=" \
                    or tokens[pos + 2][0] not in ("word", "string"):
                raise JaasError(f"login module {class_name}: expected key=value, got {value!r}")
            options[value] = tokens[pos + 2][1]
            pos += 3
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise JaasError("no login module in the JAAS configuration")
    return modules


def parse_single_module(text: str, config_name: str = "sasl.jaas.config") -> LoginModule:
    """Kafka's rule for ``sasl.jaas.config``: exactly one login module."""
    modules = parse_jaas_config(text)
    if len(modules) != 1:
        raise JaasError(f"{config_name} must contain exactly one login module, "
                        f"found {len(modules)}")
    return modules[0]


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos, end = 0, len(text)
    while pos < end:
        ch = text[pos]
        if ch.isspace():
            pos += 1
        elif text.startswith("/*", pos):
            close = text.find("*/", pos + 2)
            if close < 0:
                raise JaasError("unterminated comment")
            pos = close + 2
        elif text.startswith("//", pos) or ch == "#":
            newline = text.find("\n", pos)
            pos = end if newline < 0 else newline + 1
        elif ch in "=;":
            tokens.append((ch, ch))
            pos += 1
        elif ch == '"':
            value, pos = _quoted(text, pos + 1)
            tokens.append(("string", value))
        else:
            start = pos
            while pos < end and not text[pos].isspace() and text[pos] not in '=;"':
                pos += 1
            tokens.append(("word", text[start:pos]))
    return tokens


def _quoted(text: str, pos: int) -> tuple[str, int]:
    out = []
    while pos < len(text):
        ch = text[pos]
        if ch == "\\" and pos + 1 < len(text):
            out.append(text[pos + 1])
            pos += 2
        elif ch == '"':
            return "".join(out), pos + 1
        else:
            out.append(ch)
            pos += 1
    raise JaasError("unterminated quoted string")
