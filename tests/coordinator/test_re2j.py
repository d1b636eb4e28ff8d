"""KIP-848's SubscribedTopicRegex in RE2/J's dialect: what RE2 accepts matches the same topic names,
what it refuses answers INVALID_REGULAR_EXPRESSION with RE2's description (as Kafka's message)."""

from __future__ import annotations

import pytest

from broker.coordinator.consumer_group.re2j import Re2jError, compile_re2j
from protocol import ErrorCode
from tests.coordinator.consumer_group_harness import Client, Harness

TOPICS = ["orders", "orders-eu", "orders-us", "Orders-EU", "payments", "pay.ments", "a1", "a12", "ab", "a-b",
          "x_y", "orders-eu-2024", "aaa", "a"]


def matching(pattern):
    compiled = compile_re2j(pattern)
    return {t for t in TOPICS if compiled.fullmatch(t)}


@pytest.mark.parametrize("pattern, expected", [
    ("orders-.*", {"orders-eu", "orders-us", "orders-eu-2024"}),
    ("orders.*|pay.*", {"orders", "orders-eu", "orders-us", "orders-eu-2024", "payments", "pay.ments"}),
    ("(?i)orders-eu", {"orders-eu", "Orders-EU"}),
    ("o(?i)rders-EU", {"orders-eu"}),                       # flags from the middle on, RE2 style
    ("(?i:O)rders-eu", {"orders-eu"}),
    ("a(?i)B|X_Y", {"ab", "x_y"}),                          # the flag reaches across the alternation
    ("\\Qpay.ments\\E", {"pay.ments"}),
    ("pay\\.ments", {"pay.ments"}),
    ("[[:alpha:]]+", {"orders", "payments", "ab", "aaa", "a"}),
    ("a[[:digit:]]{1,2}", {"a1", "a12"}),
    ("\\pL+", {"orders", "payments", "ab", "aaa", "a"}),
    ("\\p{Lu}.*", {"Orders-EU"}),
    ("a\\PL", {"a1"}),
    ("[\\p{Ll}\\-]+", {"orders", "orders-eu", "orders-us", "payments", "ab", "a-b", "aaa", "a"}),
    ("(?P<name>a)+", {"aaa", "a"}),
    ("(?<name>a)b", {"ab"}),
    ("a\\x{31}", {"a1"}),
    ("a\\x31", {"a1"}),
    ("a\\061", {"a1"}),                                     # octal, not a backreference
    ("a{2,}", {"aaa"}),
    ("a{,2}", set()),                                       # RE2: a literal `{,2}`
    ("(?U)a+", {"aaa", "a"}),
    ("[^a-z]+", set()),
    ("\\w+", {"orders", "payments", "a1", "a12", "ab", "x_y", "aaa", "a"}),
    ("orders\\z", {"orders"}),
    ("^orders$", {"orders"}),
])
def test_re2_syntax_matches_like_re2j(pattern, expected):
    assert matching(pattern) == expected


@pytest.mark.parametrize("pattern, description", [
    ("(a)\\1", "invalid escape sequence"),                  # backreference
    ("\\k<n>", "invalid escape sequence"),
    ("orders(?=-eu)", "invalid or unsupported Perl syntax"),   # lookahead
    ("orders(?!-eu)", "invalid or unsupported Perl syntax"),
    ("(?<=a)b", "invalid or unsupported Perl syntax"),         # lookbehind
    ("(?<!a)b", "invalid or unsupported Perl syntax"),
    ("(?>a+)b", "invalid or unsupported Perl syntax"),         # atomic group
    ("(?(1)a|b)", "invalid or unsupported Perl syntax"),       # conditional
    ("(?#comment)a", "invalid or unsupported Perl syntax"),
    ("(?x)a", "invalid or unsupported Perl syntax"),           # no verbose flag in RE2
    ("a*+", "invalid nested repetition operator"),             # possessive
    ("a**", "invalid nested repetition operator"),
    ("a{2}{3}", "invalid nested repetition operator"),
    ("a{1001}", "invalid repeat count"),
    ("*a", "missing argument to repetition operator"),
    ("(", "missing closing )"),
    (")", "unexpected )"),
    ("[a", "missing closing ]"),
    ("[z-a]", "invalid character class range"),
    ("orders\\Z", "invalid escape sequence"),
    ("a\\", "trailing backslash at end of expression"),
    ("(?P<>a)", "invalid named capture"),
    ("\\p{Nope}", "invalid character class range"),
])
def test_what_re2j_refuses_is_refused(pattern, description):
    with pytest.raises(Re2jError) as refused:
        compile_re2j(pattern)
    assert refused.value.description == description


def test_heartbeat_answers_kafkas_invalid_regular_expression():
    h = Harness({"orders-eu": 2, "orders-us": 1, "payments": 1})
    r = Client(h, "b", regex="orders(?=-eu)").heartbeat()
    assert r.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert r.message == "SubscribedTopicRegex `orders(?=-eu)` is not a valid regular expression: " \
                        "invalid or unsupported Perl syntax."
    a = Client(h, "a", regex="(?i)ORDERS-\\pL+")
    assert a.heartbeat().error is ErrorCode.NONE
    assert a.partitions("orders-eu") == {0, 1} and a.partitions("orders-us") == {0} and not a.partitions("payments")
