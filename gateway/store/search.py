"""Full-text search over past turns: the document, the tokenizer both backends share, the index.

One document per turn (its id is the turn id, so a turn that runs again replaces its own
document). Both backends match the same way, by construction: the text is cut into terms
here (lowercase, accents removed, letters and digits only), the backends store only those
terms, and a query matches the documents that hold every one of its terms, newest first
(ties: the larger id first). The embedded store answers with SQLite FTS5, Redis with an
inverted index of sorted sets; tests/unit/test_search_contract.py holds them to one result.
"""

from __future__ import annotations

import json
import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.runtime.unicode import valid_unicode

_WORD = re.compile(r"[^\W_]+")
MIN_TERM = 2  # shorter words ("a", "I", "5") match too much to be worth indexing
MAX_TERM = 40  # longer "words" are hashes and base64, not something anyone searches for
MAX_TERMS = 600  # distinct terms kept per document
MAX_TEXT = 6000  # characters of a turn kept for snippets
MAX_QUERY_TERMS = 8


def normalize(word: str) -> str:
    """Case-folded, without accents: "Café" and "cafe" are one term."""
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def terms(text: str, limit: int = MAX_TERMS) -> list[str]:
    """The distinct terms of a text in first-seen order (at most `limit`)."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(normalize(text)):
        word = match.group()
        if MIN_TERM <= len(word) <= MAX_TERM:
            seen.setdefault(word, None)
            if len(seen) >= limit:
                break
    return list(seen)


def query_terms(query: str) -> list[str]:
    """The terms of a query; raises ValueError with a sentence to show when none is usable."""
    found = terms(query, MAX_QUERY_TERMS)
    if not found:
        raise ValueError(
            f"the query has no searchable word (words of {MIN_TERM} to {MAX_TERM} letters or "
            "digits); search for a name, a topic or a phrase someone used"
        )
    return found


@dataclass(frozen=True)
class SearchDoc:
    """One turn as the index keeps it."""

    id: str  # the turn id
    session: str  # SessionKey text
    chat: str  # chat scope, "platform:chat_id"
    ts: float  # when the turn ran (unix time)
    text: str  # what was said: the message, the answer, a line on the tools used
    terms: list[str] = field(default_factory=list)

    @classmethod
    def build(cls, doc_id: str, session: str, chat: str, ts: float, text: str) -> SearchDoc:
        # Tool output may hold lone surrogates, which neither store can encode.
        text = valid_unicode(text[:MAX_TEXT])
        return cls(doc_id, session, chat, ts, text, terms(text))

    def encode(self) -> str:
        # A plain dict, not dataclasses.asdict: that deep-copies the terms, on every turn.
        fields = {
            "id": self.id,
            "session": self.session,
            "chat": self.chat,
            "ts": self.ts,
            "text": self.text,
            "terms": self.terms,
        }
        return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def decode(cls, raw: str) -> SearchDoc:
        data: dict[str, Any] = json.loads(raw)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def snippet(self, query: Sequence[str], width: int = 220) -> str:
        """The part of the text around the first word that matches the query."""
        wanted = set(query)
        start = 0
        for match in _WORD.finditer(self.text):
            if normalize(match.group()) in wanted:
                start = match.start()
                break
        left = max(0, start - width // 3)
        if left:
            space = self.text.find(" ", left)
            left = space + 1 if 0 <= space < start else left
        piece = self.text[left : left + width]
        if left + width < len(self.text):
            cut = piece.rfind(" ")
            piece = (piece[:cut] if cut > width // 2 else piece) + " …"
        piece = " ".join(piece.split())
        return ("… " if left else "") + piece


@dataclass(frozen=True)
class PruneResult:
    docs: int  # documents removed
    sessions: list[str]  # sessions whose newest document was older than the cutoff


class SearchIndex(ABC):
    """The index a store keeps of past turns (`Store.search`)."""

    @abstractmethod
    async def add(self, doc: SearchDoc) -> None:
        """Index a turn, replacing an earlier document with the same id."""

    @abstractmethod
    async def search(
        self,
        query: Sequence[str],
        *,
        chat: str | None,
        session: str | None = None,
        limit: int = 10,
    ) -> list[SearchDoc]:
        """Documents holding every term of `query` (from `query_terms`), newest first; only
        the chat's (`chat`), the session's too (`session`), or every chat's (`chat=None`)."""

    @abstractmethod
    async def forget_chat(self, chat: str) -> int:
        """Remove every document of a chat (/forget); returns how many."""

    @abstractmethod
    async def prune(self, before: float) -> PruneResult:
        """Remove documents older than `before`; report the sessions left with none newer."""

    @abstractmethod
    async def count(self, chat: str | None = None) -> int:
        """Documents in the index (of one chat)."""
