"""The search index of the embedded store: documents in a table, their terms in SQLite FTS5.

FTS5 indexes the terms gateway/store/search.py made (space-separated), not the raw text, so
its tokenizer sees only words it keeps whole and matches exactly what the Redis index does.

A turn's document is written with the turn itself (`write`, inside the store's finish
transaction), so it is as durable as the history. Its terms reach FTS5 in batches: an FTS5
write costs most at commit (a new segment, merges), several times a plain row, and the turn
is the hot path. Every read first indexes what is staged, so nothing is ever missed; after a
crash, `load` indexes the documents that have no terms yet (FTS5 rows are always written in
rowid order, so those are the ones above its highest rowid).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.store.base import StoreUnavailable
from gateway.store.search import PruneResult, SearchDoc, SearchIndex

if TYPE_CHECKING:
    from gateway.store.embedded import EmbeddedStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS search_docs (
    rowid INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: staged terms name their row
    id TEXT NOT NULL UNIQUE,
    chat TEXT NOT NULL,
    session TEXT NOT NULL,
    ts REAL NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS search_docs_chat ON search_docs (chat, ts);
CREATE INDEX IF NOT EXISTS search_docs_session ON search_docs (session, ts);
CREATE INDEX IF NOT EXISTS search_docs_ts ON search_docs (ts);
CREATE VIRTUAL TABLE IF NOT EXISTS search_fts
    USING fts5 (terms, tokenize = 'unicode61 remove_diacritics 0');
"""

log = logging.getLogger(__name__)

_CHUNK = 500  # rows per DELETE ... IN (...), under SQLite's bound-parameter limit
_BATCH = 64  # staged documents that are indexed at once
_DELAY = 0.25  # seconds a staged document waits for more to join its batch


class EmbeddedSearch(SearchIndex):
    def __init__(self, store: EmbeddedStore) -> None:
        self._store = store
        self._staged: list[tuple[int, str]] = []  # (rowid, terms) not in FTS5 yet
        self._timer: asyncio.TimerHandle | None = None

    def load(self) -> None:
        """At open: index the documents a crash left without their terms."""
        top = self._store.query("SELECT rowid FROM search_fts ORDER BY rowid DESC LIMIT 1")
        rows = self._store.query(
            "SELECT rowid, doc FROM search_docs WHERE rowid > ?1 ORDER BY rowid",
            (top[0][0] if top else 0,),
        )
        self._staged = [(rowid, " ".join(SearchDoc.decode(raw).terms)) for rowid, raw in rows]
        self.index_staged()

    async def add(self, doc: SearchDoc) -> None:
        with self._store.transaction():
            staged = self.write(doc)
        self.stage(staged)

    def write(self, doc: SearchDoc) -> tuple[int, str]:
        """Write the document in the caller's transaction; once that commits, `stage` what
        this returns so its terms follow in a batch."""
        old = self._store.query("SELECT rowid FROM search_docs WHERE id = ?1", (doc.id,))
        if old:  # the turn ran again: its new document replaces the old one
            self._delete_rows([old[0][0]])
        row = self._store.query(
            "INSERT INTO search_docs (id, chat, session, ts, doc) VALUES (?1, ?2, ?3, ?4, ?5) "
            "RETURNING rowid",
            (doc.id, doc.chat, doc.session, doc.ts, doc.encode()),
        )
        return row[0][0], " ".join(doc.terms)

    def stage(self, staged: tuple[int, str]) -> None:
        self._staged.append(staged)
        if len(self._staged) >= _BATCH:
            self._soon(0.0)
        elif self._timer is None:
            self._soon(_DELAY)

    def index_staged(self) -> None:
        """Write the staged terms into FTS5, in one transaction. A document deleted since
        (forgotten, pruned, replaced) is skipped: rowids are never reused."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        staged, self._staged = self._staged, []
        if not staged:
            return
        try:
            with self._store.transaction():
                self._store.execute_many(
                    "INSERT INTO search_fts (rowid, terms) SELECT ?1, ?2 "
                    "WHERE EXISTS (SELECT 1 FROM search_docs WHERE rowid = ?1)",
                    staged,
                )
        except BaseException:
            self._staged = staged + self._staged
            raise

    def close(self) -> None:
        """At shutdown, before the database closes."""
        self.index_staged()

    def _soon(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(delay, self._index_in_background)

    def _index_in_background(self) -> None:
        self._timer = None
        try:
            self.index_staged()
        except StoreUnavailable as exc:  # kept staged; the next read or document tries again
            log.warning("search terms not indexed yet error=%s", exc)

    async def search(
        self,
        query: Sequence[str],
        *,
        chat: str | None,
        session: str | None = None,
        limit: int = 10,
    ) -> list[SearchDoc]:
        if not query:
            return []
        self.index_staged()
        # Terms hold letters and digits only, so quoting each one is a safe FTS5 phrase.
        match = " AND ".join(f'"{term}"' for term in query)
        where, params = ["search_fts MATCH ?1"], [match]
        if chat is not None:
            params.append(chat)
            where.append(f"d.chat = ?{len(params)}")
        if session is not None:
            params.append(session)
            where.append(f"d.session = ?{len(params)}")
        params.append(str(limit))
        rows = self._store.query(
            "SELECT d.doc FROM search_fts JOIN search_docs d ON d.rowid = search_fts.rowid "
            f"WHERE {' AND '.join(where)} ORDER BY d.ts DESC, d.id DESC LIMIT ?{len(params)}",
            params,
        )
        return [SearchDoc.decode(raw) for (raw,) in rows]

    async def forget_chat(self, chat: str) -> int:
        with self._store.transaction():
            rows = self._store.query("SELECT rowid FROM search_docs WHERE chat = ?1", (chat,))
            self._delete_rows([r[0] for r in rows])
        return len(rows)

    async def prune(self, before: float) -> PruneResult:
        with self._store.transaction():
            stale = self._store.query(
                "SELECT session FROM search_docs GROUP BY session HAVING MAX(ts) < ?1 "
                "ORDER BY session",
                (before,),
            )
            rows = self._store.query("SELECT rowid FROM search_docs WHERE ts < ?1", (before,))
            self._delete_rows([r[0] for r in rows])
        return PruneResult(len(rows), [str(s) for (s,) in stale])

    async def count(self, chat: str | None = None) -> int:
        if chat is None:
            rows = self._store.query("SELECT COUNT(*) FROM search_docs")
        else:
            rows = self._store.query("SELECT COUNT(*) FROM search_docs WHERE chat = ?1", (chat,))
        return int(rows[0][0])

    def _delete_rows(self, rowids: list[Any]) -> None:
        for i in range(0, len(rowids), _CHUNK):
            chunk = rowids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            self._store.query(f"DELETE FROM search_fts WHERE rowid IN ({marks})", chunk)
            self._store.query(f"DELETE FROM search_docs WHERE rowid IN ({marks})", chunk)
