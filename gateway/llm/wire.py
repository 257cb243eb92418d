"""Reading chat-completion payloads from any OpenAI-compatible server into our types.

Servers differ in small ways (null content, arguments as objects, missing ids, reasoning
fields, no usage); everything here tolerates them and normalises to one shape.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from gateway.llm.errors import LLMBadResponse
from gateway.llm.textcalls import parse, split_reasoning
from gateway.llm.types import Completion, ToolCall, Usage, new_call_id
from gateway.runtime.unicode import valid_unicode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RawReply:
    """One choice as the server sent it, before reasoning and text calls are split out."""

    content: str | None
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    usage: Usage


def reply_from_body(body: Any) -> RawReply:
    """The first choice of a non-streaming response; LLMBadResponse if there is none."""
    if not isinstance(body, dict):
        raise LLMBadResponse("response body is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMBadResponse("response has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise LLMBadResponse("response choice has no message")
    calls = [tool_call_from_wire(raw) for raw in _list(message.get("tool_calls"))]
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        calls.append(tool_call_from_wire(legacy))
    return RawReply(
        content=text_of(message.get("content")),
        reasoning=reasoning_of(message),
        tool_calls=tuple(call for call in calls if call is not None),
        finish_reason=_str_or_none(choice.get("finish_reason")),
        usage=usage_from_wire(body.get("usage")),
    )


def tool_call_from_wire(raw: Any) -> ToolCall | None:
    """One entry of `tool_calls`; None (logged) when it has no usable name."""
    if not isinstance(raw, dict):
        return None
    function = raw.get("function")
    source = function if isinstance(function, dict) else raw
    name = source.get("name")
    if not isinstance(name, str) or not name.strip():
        log.warning("llm tool call without a name dropped")
        return None
    call_id = raw.get("id")
    return ToolCall(
        id=call_id if isinstance(call_id, str) and call_id else new_call_id(),
        name=name.strip(),
        arguments=arguments_text(source.get("arguments", source.get("parameters"))),
    )


def arguments_text(value: Any) -> str:
    """Arguments as JSON text; some servers send an object instead of a string."""
    if value is None or value == "":
        return "{}"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def usage_from_wire(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    return Usage(_int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens")))


def text_of(content: Any) -> str | None:
    """Message content as text: a string, or the text parts of a content list."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text", "") if isinstance(part, dict) else str(part) for part in content]
        return "".join(p for p in parts if isinstance(p, str))
    return str(content)


def reasoning_of(message: dict[str, Any]) -> str | None:
    # vLLM/DeepSeek say reasoning_content; OpenRouter and Ollama say reasoning.
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def to_completion(
    raw: RawReply, *, text_calls: bool, names: Collection[str] | None = None
) -> Completion:
    """Split `<think>` reasoning out of the content and, when asked, tool calls written as text.

    `text_calls` applies only when the server returned no native calls: native calls win.
    Every text is made encodable here (a reply holding a lone surrogate would otherwise fail
    the turn when its history is stored), for streamed and whole replies alike.
    """
    content = valid_unicode(raw.content) if raw.content else raw.content
    calls = tuple(_valid_call(call) for call in raw.tool_calls)
    think: str | None = None
    if content:
        if text_calls and not calls:
            parsed = parse(content, names=names)
            content, think = parsed.content, parsed.reasoning
            calls = tuple(
                ToolCall(new_call_id(), c.name, json.dumps(c.arguments, ensure_ascii=False))
                for c in parsed.calls
            )
        else:
            rest, think = split_reasoning(content)
            content = rest.strip() or None
    else:
        content = None
    reasoning = valid_unicode("\n\n".join(p for p in (raw.reasoning, think) if p)) or None
    finish = raw.finish_reason
    if calls and finish in (None, "stop"):
        # Decided from the calls themselves: several servers say "stop" after tool calls.
        finish = "tool_calls"
    return Completion(content, calls, reasoning, finish, raw.usage)


def _valid_call(call: ToolCall) -> ToolCall:
    name, arguments = valid_unicode(call.name), valid_unicode(call.arguments)
    if name is call.name and arguments is call.arguments:
        return call
    return ToolCall(call.id, name, arguments)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float):
        return max(int(value), 0)
    return 0
