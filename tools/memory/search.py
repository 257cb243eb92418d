"""session_search: full-text search over past conversations of this chat (admins: every chat),
including ones ended with /new but never ones wiped with /forget, with dated snippets and,
when asked, a short summary of the hits written by the model."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from gateway.sdk import (
    LLMClient,
    LLMError,
    SearchDoc,
    Store,
    StoreUnavailable,
    ToolContext,
    ToolError,
    ToolFamily,
    ToolSpec,
    query_terms,
)
from tools.args import ToolArgs

log = logging.getLogger(__name__)

GROUP = "history"

SUMMARY_PROMPT = (
    "Below are excerpts of past conversations that match a search. Say in at most 120 words "
    "what they tell about the search, with the dates. Only use what the excerpts say."
)


class SessionSearchArgs(ToolArgs):
    query: str = Field(description="Words to find; every word must occur in a past turn.")
    scope: Literal["chat", "all"] = Field(
        default="chat",
        description="chat: this chat's past conversations; all: every chat (admins).",
    )
    limit: int = Field(default=8, ge=1, le=20)
    summarize: bool = Field(default=False, description="Also summarise the matches.")


class SessionSearchTools(ToolFamily):
    """session_search over the store's search index; `llm` writes the summaries asked for
    (none: the matches come without one)."""

    name = "session_search"

    def __init__(self, store: Store, admins: Sequence[str], llm: LLMClient | None) -> None:
        self.store = store
        self.admin_set = frozenset(admins)
        self.llm = llm

    async def session_search(self, args: SessionSearchArgs, ctx: ToolContext) -> str:
        try:
            words = query_terms(args.query)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        if args.scope == "all" and ctx.user.address not in self.admin_set:
            raise ToolError("only an admin may search every chat; search this chat (scope chat).")
        chat = None if args.scope == "all" else ctx.session.chat_scope
        # A person's own session in a shared chat (isolation "user") sees only their own turns.
        session = str(ctx.session) if ctx.session.user_id and chat is not None else None
        try:
            docs = await self.store.search.search(
                words, chat=chat, session=session, limit=args.limit
            )
        except StoreUnavailable as exc:
            raise ToolError(f"the search index is unavailable right now ({exc}).") from None
        if not docs:
            where = "any chat" if chat is None else "this chat's past conversations"
            return f"Nothing in {where} contains all of: {', '.join(words)}."
        listing = render_hits(docs, words, show_chat=chat is None)
        head = f"{len(docs)} past turn(s) match {args.query!r}, newest first:\n"
        if not args.summarize or self.llm is None:
            return head + listing
        return f"{await _summary(self.llm, args.query, listing)}\n\n{head}{listing}"

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="session_search",
                description=(
                    "Search this chat's earlier conversations (also ones ended with /new): dated "
                    "snippets, optionally summarised. Use it when the person refers to something "
                    "not in this conversation."
                ),
                args=SessionSearchArgs,
                handler=self.session_search,
                group=GROUP,
            )
        ]


def render_hits(docs: Sequence[SearchDoc], words: Sequence[str], *, show_chat: bool) -> str:
    lines = []
    for i, doc in enumerate(docs, 1):
        when = datetime.fromtimestamp(doc.ts, UTC).strftime("%Y-%m-%d %H:%M UTC")
        where = f" in {doc.chat}" if show_chat else ""
        lines.append(f"{i}. {when}{where}: {doc.snippet(words)}")
    return "\n".join(lines)


async def _summary(llm: LLMClient, query: str, listing: str) -> str:
    try:
        reply = await llm.complete(
            [
                {"role": "system", "content": SUMMARY_PROMPT},
                {"role": "user", "content": f"Search: {query}\n\nExcerpts:\n{listing}"},
            ],
            stream=False,
            max_tokens=400,
        )
    except LLMError as exc:
        log.warning("session_search summary failed error=%s", type(exc).__name__)
        return "(No summary: the model could not be reached; the matches follow.)"
    return f"Summary: {(reply.content or '').strip()}"
