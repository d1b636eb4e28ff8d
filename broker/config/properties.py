"""Java .properties parsing, as server.properties files are written."""

from __future__ import annotations

def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text: comments (# !), ``=``/``:``/space separators, line
    continuations with a trailing backslash, and backslash escapes (\\t \\n \\uXXXX ...)."""
    result: dict[str, str] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].lstrip()
        index += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and index < len(lines):
            line = line[:-1] + lines[index].lstrip()
            index += 1
        if _ends_with_continuation(line):
            line = line[:-1]
        key, value = _split_property(line)
        result[_unescape(key)] = _unescape(value)
    return result


def _ends_with_continuation(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    position = 0
    while position < len(line):
        char = line[position]
        if char == "\\":
            position += 2
            continue
        if char in "=: \t\f":
            key = line[:position]
            rest = line[position:].lstrip(" \t\f")
            if rest[:1] in ("=", ":") and char in " \t\f":
                rest = rest[1:].lstrip(" \t\f")
            elif char in "=:":
                rest = rest[1:].lstrip(" \t\f")
            return key, rest
        position += 1
    return line, ""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    position = 0
    while position < len(text):
        char = text[position]
        if char == "\\" and position + 1 < len(text):
            nxt = text[position + 1]
            if nxt == "u" and position + 6 <= len(text):
                try:
                    out.append(chr(int(text[position + 2:position + 6], 16)))
                    position += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            position += 2
            continue
        out.append(char)
        position += 1
    return "".join(out)
