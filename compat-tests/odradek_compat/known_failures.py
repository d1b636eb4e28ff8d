"""Scenarios Odradek cannot pass yet, as strict xfails: {node-id pattern: "issue N: what is missing"}.

Patterns are fnmatch'ed against "<file>::<test>[<params>]"; the first match wins. An entry goes in only
after the test was seen failing against Odradek for exactly that reason, and comes out the moment it
passes (strict: an unexpected pass turns the run red).
"""

KNOWN_FAILURES: dict[str, str] = {
    # Empty: the whole matrix passes against `odradek serve` (status table in compat-tests/README.md).
}
