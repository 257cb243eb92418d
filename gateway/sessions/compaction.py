"""Summarising compaction: when a session's history passes its token budget, the oldest turns
are folded into a summary the model writes, kept in the session record and shown with the
system prompt; later compactions fold the summary in again.

Only whole turns are folded (a turn starts at a user message), so an assistant's tool calls
never lose their results. Tool use inside folded turns reaches the summary model as one line
per call (gateway/sessions/turnlog.py), never verbatim. Durable facts the summary model names go to
the memory notes first. When the summary call fails, the oldest turns are dropped as before
(gateway/sessions/history.py `compact`) and a warning is logged.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass

from gateway.config import Settings
from gateway.llm.client import LLMClient
from gateway.llm.errors import LLMError
from gateway.llm.types import Message
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sessions.history import SessionRecord, compact, estimate_tokens
from gateway.sessions.turnlog import render_turns
from gateway.turn.memory import MemoryBook, MemoryEditError, MemoryScope

log = logging.getLogger(__name__)

SUMMARY_PROMPT = """\
You keep the record of a long conversation between a person and an assistant. Below are the \
summary so far (if any) and the oldest turns, which are about to be removed. Write a new \
summary that replaces both and lets the assistant carry on without them.

Reply in exactly this form:
Summary:
<at most 250 words: what the person wants, decisions, results, open tasks. Keep names, \
numbers, file paths, commands and URLs exactly. Tool use in one short clause each.>
Facts:
- user: <a lasting fact about the person, e.g. a preference>
- chat: <a lasting fact about this chat or project>
(Facts are only things worth remembering in future conversations; write "Facts:" with \
nothing under it when there are none.)"""

SUMMARY_HEADING = "Summary of the earlier part of this conversation"
# After compacting, history takes at most this share of the budget, so the next compaction is
# many turns away instead of one.
_KEEP_SHARE = 0.5
_SUMMARY_SHARE = 0.2  # the summary's own share of the budget, at most
_FACT_LINE = re.compile(r"^\s*[-*•]\s*(?:(user|chat)\s*:\s*)?(.+?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Summary:
    text: str
    facts: list[tuple[MemoryScope, str]]


def parse_summary(reply: str) -> Summary:
    """Split the summary model's reply into the summary and the facts it names."""
    parts = re.split(r"(?im)^\s*facts\s*:", reply.strip(), maxsplit=1)
    text = re.sub(r"(?i)^\s*summary\s*:\s*", "", parts[0]).strip()
    facts: list[tuple[MemoryScope, str]] = []
    for line in (parts[1] if len(parts) > 1 else "").splitlines():
        match = _FACT_LINE.match(line)
        if match and not match.group(2).startswith("<"):
            scope = (
                MemoryScope.USER if (match.group(1) or "").lower() == "user" else MemoryScope.CHAT
            )
            facts.append((scope, match.group(2)))
    return Summary(text, facts)


def summary_block(record: SessionRecord) -> str:
    """The summary as it follows the system prompt ("" when there is none)."""
    if not record.summary:
        return ""
    turns = f" ({record.summary_turns} turns)" if record.summary_turns else ""
    return f"{SUMMARY_HEADING}{turns}:\n{record.summary}"


def turn_starts(messages: list[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "user"]


class Compactor:
    """Keeps a session's history under `budget` tokens, summary included."""

    def __init__(
        self,
        llm: LLMClient | None,
        memory: MemoryBook | None,
        budget: int,
        *,
        timeout: float = 90.0,
    ) -> None:
        self._llm = llm  # None: only drop, as before summaries existed
        self._memory = memory
        self._budget = budget
        self._timeout = timeout  # the person waits for this call: retries end here too

    def needed(self, record: SessionRecord, history: list[Message]) -> bool:
        return estimate_tokens(history) + len(record.summary) // 4 > self._budget

    async def compact(
        self,
        record: SessionRecord,
        history: list[Message],
        chat: ChatRef,
        user: UserRef,
        session: str = "",
    ) -> list[Message]:
        """The history to run the turn with; folds the oldest turns into `record.summary`."""
        if not self.needed(record, history):
            return history
        fold, kept = self._split(history)
        if not fold or self._llm is None:
            return compact(history, self._budget)
        try:
            async with asyncio.timeout(self._timeout):
                reply = await self._llm.complete(
                    [
                        {"role": "system", "content": SUMMARY_PROMPT},
                        {"role": "user", "content": self._material(record, fold)},
                    ],
                    stream=False,
                    max_tokens=900,
                )
        except (LLMError, TimeoutError) as exc:
            log.warning(
                "compaction summary failed, dropping the oldest turns instead session=%s error=%s",
                session,
                type(exc).__name__,
            )
            return compact(history, self._budget)
        record.prompt_tokens += reply.usage.prompt_tokens
        record.completion_tokens += reply.usage.completion_tokens
        summary = parse_summary(reply.content or "")
        if not summary.text:
            log.warning("compaction summary was empty, dropping instead session=%s", session)
            return compact(history, self._budget)
        await self._remember(summary, chat, user, session)
        limit = int(self._budget * _SUMMARY_SHARE) * 4
        record.summary = summary.text if len(summary.text) <= limit else summary.text[:limit] + "…"
        record.summary_turns += len(turn_starts(fold))
        log.info(
            "history compacted session=%s folded_turns=%d summary_chars=%d",
            session,
            len(turn_starts(fold)),
            len(record.summary),
        )
        return kept

    def _split(self, history: list[Message]) -> tuple[list[Message], list[Message]]:
        """The oldest whole turns to fold, and the rest (always at least the newest turn)."""
        target = int(self._budget * _KEEP_SHARE)
        starts = turn_starts(history)
        if len(starts) < 2:
            return [], history
        cut = starts[-1]  # at least everything before the newest turn goes, if need be
        for start in starts[1:]:
            if estimate_tokens(history[start:]) <= target:
                cut = start
                break
        return history[:cut], history[cut:]

    @staticmethod
    def _material(record: SessionRecord, fold: list[Message]) -> str:
        earlier = f"Summary so far:\n{record.summary}\n\n" if record.summary else ""
        return f"{earlier}Oldest turns:\n{render_turns(fold)}"

    async def _remember(self, summary: Summary, chat: ChatRef, user: UserRef, session: str) -> None:
        if self._memory is None:
            return
        for scope, fact in summary.facts:
            try:
                await self._memory.add(scope, chat, user, fact)
            except MemoryEditError as exc:
                # The notes are full or the fact is not valid; the summary still has it.
                log.info("compaction fact not saved session=%s reason=%s", session, exc)


def summary_client(settings: Settings, main: LLMClient) -> LLMClient:
    """The client for summaries: `main`, or one for `agent.summary_model` when that is set (the
    caller closes it when it is not `main`)."""
    model = settings.agent.summary_model
    if not model or model == settings.llm.model:
        return main
    return LLMClient(settings.llm.model_copy(update={"model": model}))
