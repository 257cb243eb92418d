"""The system prompt a session starts with: who the agent is, where it is, what it remembers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from gateway.messages import ChatKind, ChatRef, UserRef
from gateway.untrusted import PROMPT as UNTRUSTED_PROMPT

# Extra prompt sections contributed by other parts (skills index, scheduler hints).
PromptSection = Callable[[ChatRef, UserRef], str]

BASE_PROMPT = f"""\
You are chatgate, a capable assistant that people reach through a chat app. You can use \
tools to do real work: read and write files in your workspace, run commands, fetch web \
pages, remember things and schedule reminders, when those tools are offered to you.

How to work:
- Answer directly when no tool is needed. Use tools when they give a better answer.
- Keep replies short and readable in a chat window. Use Markdown sparingly.
- When a tool returns an error, read it, fix the call and try again, or explain the problem.
- Actions that change or delete things may need a person to approve them in the chat.
- {UNTRUSTED_PROMPT}
- Save durable facts the person asks you to remember with the memory tool; do not save \
passing details."""


def build_system_prompt(
    chat: ChatRef,
    user: UserRef,
    *,
    notes: str = "",
    extra: str = "",
    sections: Sequence[PromptSection] = (),
    now: datetime | None = None,
) -> str:
    now = now or datetime.now(UTC)
    where = {
        ChatKind.DIRECT: f"a direct chat on {chat.platform} with {user.label}",
        ChatKind.GROUP: f"a group chat on {chat.platform}; several people may talk to you",
        ChatKind.CHANNEL: f"a channel on {chat.platform}; several people may talk to you",
    }[chat.kind]
    parts = [
        BASE_PROMPT,
        f"You are in {where}. The session started at {now:%Y-%m-%d %H:%M} UTC.",
    ]
    if extra.strip():
        parts.append(extra.strip())
    parts.extend(text for section in sections if (text := section(chat, user).strip()))
    if notes:
        parts.append(notes)
    return "\n\n".join(parts)
