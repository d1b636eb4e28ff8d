"""KIP-848's `SubscribedTopicRegex` in the RE2/J dialect Kafka compiles it with (com.google.re2j),
translated to a Python `re` pattern that matches the same topic names.

RE2 is not PCRE: what it refuses (backreferences, lookahead and lookbehind, atomic groups,
possessive and nested quantifiers, conditionals, comments, `\\Z`, repeat counts over 1000) is refused
here with RE2's description, which Kafka puts in its INVALID_REGULAR_EXPRESSION message. What it
accepts and Python spells otherwise is rewritten: `\\z`, `\\Q...\\E`, `\\x{...}`, octal escapes,
`(?<name>...)`, POSIX classes `[[:alpha:]]`, `\\pL`/`\\p{...}` classes, inline flags anywhere in the
pattern (`a(?i)b`, scoped to the rest of their group as in RE2) and the ungreedy flag `U`.

Topic names use only `[a-zA-Z0-9._-]`, so Unicode classes are translated exactly on that alphabet.
"""

from __future__ import annotations

import re
import string

MAX_REPEAT = 1000
TOPIC_ALPHABET = string.ascii_letters + string.digits + "._-"

INVALID_ESCAPE = "invalid escape sequence"
INVALID_PERL_OP = "invalid or unsupported Perl syntax"
NESTED_REPEAT = "invalid nested repetition operator"
MISSING_REPEAT_ARGUMENT = "missing argument to repetition operator"
INVALID_REPEAT_SIZE = "invalid repeat count"
MISSING_BRACKET = "missing closing ]"
MISSING_PAREN = "missing closing )"
UNEXPECTED_PAREN = "unexpected )"
INVALID_CHAR_RANGE = "invalid character class range"
INVALID_CHAR_CLASS = "invalid character class"
INVALID_NAMED_CAPTURE = "invalid named capture"
TRAILING_BACKSLASH = "trailing backslash at end of expression"

_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": re.escape(string.punctuation),
    "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
# Unicode general categories and scripts, as sets over the topic-name alphabet
_UNICODE = {
    "Any": "\\x00-\\U0010ffff", "L": "A-Za-z", "Lu": "A-Z", "Ll": "a-z", "N": "0-9", "Nd": "0-9",
    "P": "._\\-", "Po": ".", "Pc": "_", "Pd": "\\-", "Latin": "A-Za-z", "Common": "0-9._\\-",
}
_EMPTY_UNICODE = {"Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "Nl", "No", "Ps", "Pe", "Pi", "Pf", "S", "Sm", "Sc",
                  "Sk", "So", "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf", "Co", "Cs", "Greek", "Cyrillic", "Han",
                  "Arabic", "Hebrew", "Hiragana", "Katakana", "Hangul", "Thai", "Devanagari", "Armenian",
                  "Georgian", "Ethiopic", "Inherited"}
_SIMPLE_ESCAPES = set("dDsSwWbBAfnrtav")   # the same in both dialects
_FLAGS = set("imsU")


class Re2jError(ValueError):
    """RE2/J refuses the pattern; `description` is its PatternSyntaxException description."""

    def __init__(self, description: str):
        super().__init__(description)
        self.description = description


def compile_re2j(pattern: str) -> re.Pattern:
    return re.compile(_Translator(pattern).translate())


class _Group:
    def __init__(self, ungreedy: bool):
        self.ungreedy = ungreedy
        self.flag_groups: list[str] = []   # inline flags met in this group: "(?i:" groups left open


class _Translator:
    def __init__(self, pattern: str):
        self.src, self.i, self.out = pattern, 0, []
        self.stack = [_Group(False)]
        self.can_repeat = False      # the last item can take a quantifier

    def translate(self) -> str:
        src = self.src
        while self.i < len(src):
            c = src[self.i]
            if c == "\\":
                self._escape()
            elif c == "[":
                self._emit(self._char_class(), True)
            elif c == "(":
                self._open()
            elif c == ")":
                self._close()
            elif c == "|":
                self._close_flag_groups()
                self.out.append("|")
                self._reopen_flag_groups()
                self.i += 1
                self.can_repeat = False
            elif c in "*+?":
                self._quantifier(c)
            elif c == "{" and self._repeat_at(self.i):
                self._counted_repeat()
            elif c in "^$.":
                self.out.append(c)
                self.i += 1
                self.can_repeat = c == "."
            else:
                self._emit(re.escape(c), True)
                self.i += 1
        if len(self.stack) > 1:
            raise Re2jError(MISSING_PAREN)
        self._close_flag_groups()
        return "".join(self.out)

    def _emit(self, text: str, repeatable: bool) -> None:
        self.out.append(text)
        self.can_repeat = repeatable

    # ---- quantifiers -------------------------------------------------------------------------------
    def _quantifier(self, op: str) -> None:
        if not self.can_repeat:
            raise Re2jError(MISSING_REPEAT_ARGUMENT)
        self.i += 1
        self._finish_quantifier(op)

    def _finish_quantifier(self, op: str) -> None:
        lazy = self.i < len(self.src) and self.src[self.i] == "?"
        if lazy:
            self.i += 1
        if self.i < len(self.src) and (self.src[self.i] in "*+?" or
                                       (self.src[self.i] == "{" and self._repeat_at(self.i))):
            raise Re2jError(NESTED_REPEAT)       # `**`, possessive `*+`, `a{2}{3}`
        if self.stack[-1].ungreedy:
            lazy = not lazy
        self.out.append(op + ("?" if lazy else ""))
        self.can_repeat = False

    def _repeat_at(self, i: int) -> bool:
        return re.match(r"\{\d+(,\d*)?\}", self.src[i:]) is not None

    def _counted_repeat(self) -> None:
        m = re.match(r"\{(\d+)(,(\d*))?\}", self.src[self.i:])
        low, high = int(m.group(1)), m.group(3)
        if low > MAX_REPEAT or (high and (int(high) > MAX_REPEAT or int(high) < low)):
            raise Re2jError(INVALID_REPEAT_SIZE)
        if not self.can_repeat:
            raise Re2jError(MISSING_REPEAT_ARGUMENT)
        self.i += len(m.group(0))
        self._finish_quantifier(m.group(0))

    # ---- groups ------------------------------------------------------------------------------------
    def _open(self) -> None:
        src, i = self.src, self.i
        ungreedy = self.stack[-1].ungreedy
        if src.startswith("(?", i):
            if src.startswith("(?P<", i) or (src.startswith("(?<", i) and not src.startswith(("(?<=", "(?<!"), i)):
                start = i + (4 if src.startswith("(?P<", i) else 3)
                end = src.find(">", start)
                name = src[start:end] if end >= 0 else ""
                if end < 0 or not re.fullmatch(r"[A-Za-z0-9_]+", name):
                    raise Re2jError(INVALID_NAMED_CAPTURE)
                self.out.append(f"(?P<{name}>")
                self.i = end + 1
            else:
                m = re.match(r"\(\?([A-Za-z]*)(?:-([A-Za-z]*))?([:)])", src[i:])
                if m is None or not set(m.group(1) + (m.group(2) or "")) <= _FLAGS \
                        or (m.group(2) is not None and not m.group(2)):
                    raise Re2jError(INVALID_PERL_OP)   # lookaround, atomic, conditional, comment...
                on, off = m.group(1), m.group(2) or ""
                if "U" in on:
                    ungreedy = True
                if "U" in off:
                    ungreedy = False
                flags = _python_flags(on, off)
                self.i += len(m.group(0))
                if m.group(3) == ")":
                    # flags for the rest of the current group: a scoped group closed with it
                    group = self.stack[-1]
                    group.ungreedy = ungreedy
                    if flags:
                        group.flag_groups.append(f"(?{flags}:")
                        self.out.append(f"(?{flags}:")
                    self.can_repeat = False
                    return
                self.out.append(f"(?{flags}:" if flags else "(?:")
        else:
            self.out.append("(")
            self.i += 1
        self.stack.append(_Group(ungreedy))
        self.can_repeat = False

    def _close(self) -> None:
        if len(self.stack) == 1:
            raise Re2jError(UNEXPECTED_PAREN)
        self._close_flag_groups()
        self.stack.pop()
        self._emit(")", True)
        self.i += 1

    def _close_flag_groups(self) -> None:
        self.out.append(")" * len(self.stack[-1].flag_groups))

    def _reopen_flag_groups(self) -> None:
        self.out.extend(self.stack[-1].flag_groups)

    # ---- escapes -----------------------------------------------------------------------------------
    def _escape(self) -> None:
        text, repeatable = self._escape_text(in_class=False)
        self._emit(text, repeatable)

    def _escape_text(self, in_class: bool) -> tuple[str, bool]:
        src, i = self.src, self.i
        if i + 1 >= len(src):
            raise Re2jError(TRAILING_BACKSLASH)
        c = src[i + 1]
        self.i = i + 2
        if c in "bBA" and not in_class:
            return "\\" + c, False
        if c == "z" and not in_class:
            return "\\Z", False
        if c in _SIMPLE_ESCAPES and c not in "bBA":
            return "\\" + c, True
        if c in "pP":
            return self._unicode_class(c == "P", in_class), True
        if c == "Q" and not in_class:
            end = src.find("\\E", self.i)
            literal = src[self.i:] if end < 0 else src[self.i:end]
            self.i = len(src) if end < 0 else end + 2
            return re.escape(literal), bool(literal)
        if c == "x":
            m = re.match(r"\{([0-9A-Fa-f]{1,8})\}|([0-9A-Fa-f]{2})", src[self.i:])
            if m is None or int(m.group(1) or m.group(2), 16) > 0x10FFFF:
                raise Re2jError(INVALID_ESCAPE)
            self.i += len(m.group(0))
            return _char(int(m.group(1) or m.group(2), 16)), True
        if c in "01234567":
            # a single non-zero digit would be a backreference, which RE2 does not have
            m = re.match(r"[0-7]{0,2}", src[self.i:])
            digits = c + m.group(0)
            if c != "0" and len(digits) == 1:
                raise Re2jError(INVALID_ESCAPE)
            self.i += len(m.group(0))
            return _char(int(digits, 8)), True
        if c < "\x80" and not c.isalnum():
            return re.escape(c), True            # an escaped punctuation character is itself
        raise Re2jError(INVALID_ESCAPE)           # \k<name>, \Z, \e, \8, ...

    def _unicode_class(self, negated: bool, in_class: bool) -> str:
        src = self.src
        if self.i < len(src) and src[self.i] == "{":
            end = src.find("}", self.i)
            if end < 0:
                raise Re2jError(INVALID_CHAR_RANGE)
            name = src[self.i + 1:end]
            self.i = end + 1
        elif self.i < len(src):
            name = src[self.i]
            self.i += 1
        else:
            raise Re2jError(INVALID_CHAR_RANGE)
        if name.startswith("^"):
            negated, name = not negated, name[1:]
        if name in _UNICODE:
            members = _UNICODE[name]
        elif name in _EMPTY_UNICODE:
            members = ""
        else:
            raise Re2jError(INVALID_CHAR_RANGE)
        if in_class:
            if negated:
                # the complement over the topic-name alphabet (no topic name has other characters)
                inside = re.compile(f"[{members}]") if members else None
                return "".join(re.escape(ch) for ch in TOPIC_ALPHABET if inside is None or not inside.match(ch))
            return members
        if not members:
            return "[\\x00-\\U0010ffff]" if negated else "[^\\x00-\\U0010ffff]"
        return f"[{'^' if negated else ''}{members}]"

    # ---- character classes -------------------------------------------------------------------------
    def _char_class(self) -> str:
        src = self.src
        self.i += 1
        negated = self.i < len(src) and src[self.i] == "^"
        if negated:
            self.i += 1
        parts: list[str] = []
        first = True
        previous_single: str | None = None    # the last single character, for a range
        while True:
            if self.i >= len(src):
                raise Re2jError(MISSING_BRACKET)
            c = src[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if src.startswith("[:", self.i):
                m = re.match(r"\[:(\^?)([a-z]+):\]", src[self.i:])
                if m is None or m.group(2) not in _POSIX:
                    raise Re2jError(INVALID_CHAR_RANGE)
                if m.group(1):
                    raise Re2jError(INVALID_CHAR_RANGE)   # negated POSIX classes inside a class: rare
                parts.append(_POSIX[m.group(2)])
                self.i += len(m.group(0))
                previous_single = None
                continue
            if c == "-" and previous_single is not None and self.i + 1 < len(src) and src[self.i + 1] != "]":
                self.i += 1
                high = self._class_char()
                if high is None or ord(_unescape(high)) < ord(_unescape(previous_single)):
                    raise Re2jError(INVALID_CHAR_RANGE)
                parts.append("-" + high)
                previous_single = None
                continue
            if c == "\\":
                text, _ = self._escape_text(in_class=True)
                parts.append(text)
                previous_single = text if len(_unescape(text)) == 1 and not text.startswith("\\p") \
                    and text not in ("\\d", "\\D", "\\s", "\\S", "\\w", "\\W") else None
                continue
            parts.append(re.escape(c) if c in "[]&~|-^\\" else c)
            previous_single = parts[-1]
            self.i += 1
        return "[" + ("^" if negated else "") + "".join(parts) + "]"

    def _class_char(self):
        c = self.src[self.i]
        if c == "\\":
            text, _ = self._escape_text(in_class=True)
            return text if len(_unescape(text)) == 1 else None
        self.i += 1
        return re.escape(c) if c in "[]&~|-^\\" else c


def _python_flags(on: str, off: str) -> str:
    on, off = on.replace("U", ""), off.replace("U", "")
    return on + ("-" + off if off else "")


def _char(code: int) -> str:
    return re.escape(chr(code)) if code >= 0x20 else f"\\x{code:02x}"


def _unescape(text: str) -> str:
    """The character an escaped single-character text stands for (for range checks)."""
    if text.startswith("\\x") and len(text) == 4:
        return chr(int(text[2:], 16))
    if text.startswith("\\") and len(text) == 2:
        return {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}.get(text[1], text[1])
    return text
