"""The two ways tool calls travel: native (`tools` in the request, `tool_calls` back) and text
(tools described in the prompt, calls parsed from the reply). Each turns a request into
what is sent and says how to read the reply; the client has one completion path for both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.llm.textmode import to_text_messages, tool_names
from gateway.llm.types import Message

FormatName = Literal["native", "text"]


@dataclass(frozen=True)
class PreparedCall:
    messages: list[Message]
    body: dict[str, Any] = field(default_factory=dict)  # added to the request body
    text_calls: bool = False  # read tool calls written as text in the reply
    names: list[str] | None = None  # the offered tools, when text calls are read


def prepare(
    name: FormatName,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    tool_choice: str | dict[str, Any] | None,
    *,
    lenient: bool,
) -> PreparedCall:
    """The request in format `name`. `lenient` (tool_call_format = auto): a native reply may
    still carry calls written as text, and those are accepted too."""
    if name == "text":
        offered = bool(tools) and tool_choice != "none"
        return PreparedCall(
            to_text_messages(messages, tools, tool_choice),
            text_calls=offered,
            names=tool_names(tools) if offered else None,
        )
    body: dict[str, Any] = {}
    if tools:
        body["tools"] = tools
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
    text_calls = bool(tools) and lenient
    return PreparedCall(
        messages, body, text_calls=text_calls, names=tool_names(tools) if text_calls else None
    )
