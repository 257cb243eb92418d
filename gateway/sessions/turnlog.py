"""What a turn did, in a few lines: its tool calls summarised (what ran and how it ended, never
the full output), for compaction summaries and the search index of past turns."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from gateway.llm.types import Message

_MAIN_ARGS = ("command", "code", "path", "url", "query", "pattern", "name", "task", "text")
_EXIT = re.compile(r"\[exit code (-?\d+)\]\s*$")
_MAX_ARG = 80
_MAX_RESULT = 80
_MAX_NOTE = 600


def tool_note(messages: Sequence[Message]) -> str:
    """One line for every tool call in `messages`: "ran `git status`: 3 files modified; ..."."""
    results = {
        m.get("tool_call_id"): str(m.get("content") or "")
        for m in messages
        if m.get("role") == "tool"
    }
    parts = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            result = results.get(call.get("id"), "")
            parts.append(
                describe_call(function.get("name", "?"), function.get("arguments"), result)
            )
    note = "; ".join(parts)
    return note if len(note) <= _MAX_NOTE else note[: _MAX_NOTE - 1] + "…"


def describe_call(name: str, arguments: Any, result: str) -> str:
    args = _arguments(arguments)
    main = next((str(args[k]) for k in _MAIN_ARGS if args.get(k)), "")
    if not main:  # a tool of its own kind: its first text argument says what it worked on
        main = next((v for v in args.values() if isinstance(v, str) and v.strip()), "")
    main = _clip(" ".join(main.split()), _MAX_ARG)
    head = f"ran `{main}`" if name == "shell" and main else f"{name} {main}".strip()
    return f"{head}: {_outcome(result)}"


def _outcome(result: str) -> str:
    text = result.strip()
    if not text:
        return "no output"
    if text.startswith("error:"):
        return "failed (" + _clip(_first_line(text.removeprefix("error:")), _MAX_RESULT) + ")"
    exit_code = _EXIT.search(text)
    body = _EXIT.sub("", text).strip() if exit_code else text
    lines = [line for line in body.splitlines() if line.strip()]
    summary = _clip(lines[0].strip(), _MAX_RESULT) if lines else "no output"
    if len(lines) > 1:
        summary += f" (+{len(lines) - 1} lines)"
    if exit_code and exit_code.group(1) != "0":
        summary += f" [exit {exit_code.group(1)}]"
    return summary


def turn_text(user_text: str, added: Sequence[Message], answer: str) -> str:
    """A turn as the search index keeps it: the message, what the tools did, the answer."""
    parts = [f"User: {user_text.strip()}"] if user_text.strip() else []
    note = tool_note(added)
    if note:
        parts.append(f"Tools: {note}")
    if answer.strip():
        parts.append(f"Assistant: {answer.strip()}")
    return "\n".join(parts)


def render_turns(messages: Sequence[Message]) -> str:
    """Turns for the summary model to read: text as said, tool use as one line per step."""
    lines: list[str] = []
    pending: list[Message] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            pending.append(message)
            continue
        if pending:
            lines.append("Tools: " + tool_note(pending))
            pending = []
        content = message.get("content")
        if isinstance(content, str) or not content:
            text = content or ""
        else:  # content parts (text and images)
            text = json.dumps(content, ensure_ascii=False)
        if message.get("tool_calls"):
            pending.append(message)
            if text and text.strip():
                lines.append(f"Assistant: {text.strip()}")
        elif role in ("user", "assistant") and text and text.strip():
            lines.append(f"{role.capitalize()}: {text.strip()}")
    if pending:
        lines.append("Tools: " + tool_note(pending))
    return "\n".join(lines)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
