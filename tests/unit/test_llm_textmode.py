"""Text tool-call mode: the tools prompt and the history rewrite, without a server."""

from __future__ import annotations

import json
from typing import Any

from gateway.llm.textcalls import parse
from gateway.llm.textmode import render_tools, to_text_messages, tool_names
from gateway.llm.types import Completion, ToolCall, Usage

TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search  the\nweb.",
        "parameters": {
            "type": "object",
            "title": "SearchArgs",
            "properties": {
                "title": {"type": "string", "title": "Title"},
                "n": {"type": "integer", "title": "N", "default": 5},
            },
        },
    },
}


def test_render_is_compact_and_keeps_property_named_title() -> None:
    text = render_tools([TOOL], None)
    assert "- search: Search the web." in text
    schema = json.loads(text.split("parameters: ", 1)[1].splitlines()[0])
    assert schema == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "n": {"type": "integer", "default": 5}},
    }


def test_tool_choice_rendering() -> None:
    forced = {"type": "function", "function": {"name": "search"}}
    assert "must call the tool search" in render_tools([TOOL], forced)
    assert "at least one tool" in render_tools([TOOL], "required")
    prompt = to_text_messages([{"role": "user", "content": "hi"}], [TOOL], "none")
    assert prompt == [{"role": "user", "content": "hi"}]


def test_system_prompt_added_when_missing_and_list_content_kept() -> None:
    added = to_text_messages([{"role": "user", "content": "hi"}], [TOOL])
    assert added[0]["role"] == "system" and "search" in added[0]["content"]
    parts = [{"type": "text", "text": "Be brief."}]
    system = to_text_messages([{"role": "system", "content": parts}], [TOOL])[0]
    assert system["content"][0] == parts[0] and "search" in system["content"][1]["text"]
    assert len(parts) == 1


def test_rendered_history_parses_back() -> None:
    completion = Completion(
        content="Looking.",
        tool_calls=(ToolCall("c1", "search", '{"title": "x"}'), ToolCall("c2", "search", "oops")),
        reasoning=None,
        finish_reason="tool_calls",
        usage=Usage(),
    )
    history = [
        completion.assistant_message(),
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c2", "name": "search", "content": "r2"},
        {"role": "user", "content": "thanks"},
    ]
    out = to_text_messages(history, None)
    assert [m["role"] for m in out] == ["assistant", "user", "user"]
    reparsed = parse(out[0]["content"], names=["search"])
    # Arguments that were never an object are replayed as the model wrote them and read back
    # as the same string (as vLLM's Hermes parser does), so the agent can ask for an object.
    assert [(c.name, c.arguments) for c in reparsed.calls] == [
        ("search", {"title": "x"}),
        ("search", "oops"),
    ]
    assert reparsed.content == "Looking."
    assert out[1]["content"].count("<tool_response") == 2


def test_tool_names() -> None:
    assert tool_names([TOOL, {"name": "bare"}, {"type": "function"}]) == ["search", "bare"]
    assert tool_names(None) == []
