"""``ssl.principal.mapping.rules``: a TLS client certificate's subject DN → a principal name.

Kafka's syntax: a comma-separated list of ``RULE:pattern/replacement/`` (optionally followed by ``L`` or
``U`` to lower- or upper-case the result) and ``DEFAULT`` (the DN unchanged). The first rule whose
pattern matches the whole DN wins; ``$1`` in the replacement is the first group. No matching rule
fails the authentication, as in Kafka.
"""

from __future__ import annotations

import re

from broker.config import ConfigError

_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/([LU]?))\s*(?:,|$)")


class NoMatchingRule(Exception):
    pass


class PrincipalMapper:
    def __init__(self, rules: str | None = "DEFAULT"):
        self.text = rules or "DEFAULT"
        self.rules: list[tuple[re.Pattern, str, str] | None] = []   # None = DEFAULT
        pos = 0
        text = self.text.strip()
        while pos < len(text):
            match = _RULE.match(text, pos)
            if not match or match.end() == pos:
                raise ConfigError(f"Invalid rule: {text[pos:]}", "ssl.principal.mapping.rules")
            if match.group(1):
                self.rules.append(None)
            else:
                pattern = match.group(2).replace("\\/", "/")
                try:
                    compiled = re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"Invalid rule pattern {pattern}: {exc}",
                                      "ssl.principal.mapping.rules") from None
                self.rules.append((compiled, match.group(3).replace("\\/", "/"), match.group(4)))
            pos = match.end()

    def name_for(self, distinguished_name: str) -> str:
        for rule in self.rules:
            if rule is None:
                return distinguished_name
            pattern, replacement, case = rule
            if pattern.fullmatch(distinguished_name):
                name = pattern.sub(lambda m: _expand(replacement, m), distinguished_name, count=1)
                return name.lower() if case == "L" else name.upper() if case == "U" else name
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {self.text}")


def _expand(replacement: str, match: re.Match) -> str:
    """Java's Matcher replacement syntax: $n is a group, a backslash quotes the next character."""
    out, pos = [], 0
    while pos < len(replacement):
        ch = replacement[pos]
        if ch == "\\" and pos + 1 < len(replacement):
            out.append(replacement[pos + 1])
            pos += 2
        elif ch == "$" and pos + 1 < len(replacement) and replacement[pos + 1].isdigit():
            end = pos + 1
            while end < len(replacement) and replacement[end].isdigit() \
                    and int(replacement[pos + 1:end + 1]) <= (match.re.groups or 0):
                end += 1
            out.append(match.group(int(replacement[pos + 1:end])) or "")
            pos = end
        else:
            out.append(ch)
            pos += 1
    return "".join(out)
