"""Text tool-call mode for servers without native tool calling.

Tools are described in the system prompt, native history is rewritten on the way out
(calls as `<tool_call>` blocks, results as `<tool_response>` user turns), and replies are
parsed back by `textcalls`. Stored history never changes shape.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.llm.lenient_json import LenientJSONError
from gateway.llm.lenient_json import loads as loads_lenient
from gateway.llm.types import Message
from gateway.llm.wire import text_of

_INSTRUCTIONS = """\
# Tools

You can call the tools listed below. To call a tool, write a block exactly like this, with \
the arguments as a JSON object:
<tool_call>{"name": "tool_name", "arguments": {"param": "value"}}</tool_call>
Write several blocks to call several tools at once. After your calls, stop and wait: the \
results come back in the next message as <tool_response name="tool_name">...</tool_response>. \
Only call tools listed here. When you need no tool, answer normally, without any <tool_call>.

Available tools:"""


def tool_functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `function` part of each OpenAI tool entry (bare function dicts also accepted)."""
    functions = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            functions.append(function)
    return functions


def tool_names(tools: list[dict[str, Any]] | None) -> list[str]:
    return [f["name"] for f in tool_functions(tools or [])]


def render_tools(tools: list[dict[str, Any]], tool_choice: str | dict[str, Any] | None) -> str:
    """The system-prompt section that teaches the model the tools and the call format."""
    lines = [_INSTRUCTIONS]
    for function in tool_functions(tools):
        description = " ".join(str(function.get("description") or "").split())
        lines.append(f"- {function['name']}: {description}".rstrip(": "))
        parameters = function.get("parameters")
        if parameters:
            schema = json.dumps(
                _without_titles(parameters), ensure_ascii=False, separators=(",", ":")
            )
            lines.append(f"  parameters: {schema}")
    forced = _forced_tool(tool_choice)
    if forced:
        lines.append(f"\nIn this reply you must call the tool {forced}.")
    elif tool_choice == "required":
        lines.append("\nIn this reply you must call at least one tool.")
    return "\n".join(lines)


def to_text_messages(
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    tool_choice: str | dict[str, Any] | None = None,
) -> list[Message]:
    """Native history rewritten for a server that only sees text; the input is not modified."""
    out: list[Message] = []
    call_names: dict[str, str] = {}
    responses: list[str] = []  # consecutive tool results, merged into one user turn

    def close_responses() -> None:
        if responses:
            out.append({"role": "user", "content": "\n".join(responses)})
            responses.clear()

    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            name = message.get("name") or call_names.get(str(call_id), "tool")
            result = text_of(message.get("content")) or ""
            responses.append(f'<tool_response name="{name}">\n{result}\n</tool_response>')
            continue
        close_responses()
        if role == "assistant" and message.get("tool_calls"):
            blocks = []
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                name = str(function.get("name", ""))
                call_names[str(call.get("id"))] = name
                payload = {"name": name, "arguments": _arguments_value(function.get("arguments"))}
                blocks.append(f"<tool_call>{json.dumps(payload, ensure_ascii=False)}</tool_call>")
            text = text_of(message.get("content")) or ""
            out.append({"role": "assistant", "content": "\n".join(filter(None, [text, *blocks]))})
            continue
        out.append(message)
    close_responses()
    if tools and tool_choice != "none":
        _add_to_system(out, render_tools(tools, tool_choice))
    return out


def _add_to_system(messages: list[Message], section: str) -> None:
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        content = first.get("content")
        if isinstance(content, list):
            first["content"] = [*content, {"type": "text", "text": "\n\n" + section}]
        else:
            first["content"] = f"{content}\n\n{section}" if content else section
        messages[0] = first
    else:
        messages.insert(0, {"role": "system", "content": section})


def _arguments_value(raw: Any) -> Any:
    """Arguments as an object for the transcript; unreadable text is kept as a string."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        return loads_lenient(raw)
    except LenientJSONError:
        return raw


def _forced_tool(tool_choice: str | dict[str, Any] | None) -> str | None:
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None


def _without_titles(schema: Any, *, in_properties: bool = False) -> Any:
    """Pydantic adds a `title` to every schema node; they cost tokens and say nothing new."""
    if isinstance(schema, dict):
        return {
            key: _without_titles(value, in_properties=key in ("properties", "$defs"))
            for key, value in schema.items()
            if in_properties or not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    return schema
