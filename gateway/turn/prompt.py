"""The system prompt: the part a session starts with (who the agent is, where it is, what it
remembers), and the parts added every turn (sections such as the skills index, the summary of
earlier turns)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from gateway.approvals.untrusted import PROMPT as UNTRUSTED_PROMPT
from gateway.sdk.messages import ChatKind, ChatRef, UserRef

# Extra prompt text contributed by other parts (skills index), for a chat and person; "" adds
# nothing. Rendered at every turn, so it may change while a session runs (a new skill).
PromptSection = Callable[[ChatRef, UserRef], str | Awaitable[str]]

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
    sections: Sequence[str] = (),
    now: datetime | None = None,
) -> str:
    """The prompt a session starts with; `sections` are texts already rendered."""
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
    parts.extend(text.strip() for text in sections if text.strip())
    if notes:
        parts.append(notes)
    return "\n\n".join(parts)


async def render_sections(
    sections: Sequence[PromptSection], chat: ChatRef, user: UserRef
) -> list[str]:
    texts = []
    for section in sections:
        value = section(chat, user)
        text = await value if inspect.isawaitable(value) else value
        if text.strip():
            texts.append(text.strip())
    return texts


def turn_prompt(base: str, sections: Sequence[str], summary: str) -> str:
    """A turn's system message: the session's prompt, then this turn's sections and summary."""
    return "\n\n".join(part for part in (base, *sections, summary) if part)
