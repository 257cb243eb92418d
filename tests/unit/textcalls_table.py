"""The shape of a text-call case table and the check every family test runs twice:
once without tool names and once with the names a turn would offer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gateway.llm.textcalls import _parse

Calls = list[tuple[str, Any]]

# What the gateway offers in the "with names" run; cases that name anything else test the filter.
OFFERED = (
    "get_weather",
    "search",
    "send_email",
    "read_file",
    "run_shell",
    "get_time",
    "calculate_area",
    "todo_write",
    "code_interpreter",
    "fs.read_file",
    "web-search",
)
W = {"city": "Paris"}
Q = {"query": "rust"}
GW = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
SEARCH = '{"name": "search", "arguments": {"query": "rust"}}'


@dataclass(frozen=True)
class Expect:
    content: str | None
    calls: Calls
    reasoning: str | None = None


@dataclass(frozen=True)
class Case:
    """One model output and what parse must make of it.

    `named` is the result when the offered names are passed, if it differs from the result
    without names (the ambiguous formats only count for offered tools, and some only then).
    """

    id: str
    text: str
    content: str | None
    calls: Calls
    reasoning: str | None = None
    named: Expect | None = None

    def expected(self, with_names: bool) -> Expect:
        if with_names and self.named is not None:
            return self.named
        return Expect(self.content, self.calls, self.reasoning)


def params(cases: list[Case]) -> list[Any]:
    """Each case twice: without names and with the offered names."""
    ids = [case.id for case in cases]
    assert len(set(ids)) == len(ids), "case ids must be unique"
    return [
        pytest.param(case, with_names, id=f"{case.id}-{'named' if with_names else 'bare'}")
        for case in cases
        for with_names in (False, True)
    ]


def check(case: Case, with_names: bool) -> None:
    # The private entry point: parse() keeps a safety net that would hide a parser bug.
    reply = _parse(case.text, list(OFFERED) if with_names else None)
    want = case.expected(with_names)
    got = [(call.name, call.arguments) for call in reply.calls]
    assert (reply.content, got, reply.reasoning) == (want.content, want.calls, want.reasoning)
