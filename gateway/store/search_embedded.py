"""The search index of the embedded store: documents in a table, their terms in SQLite FTS5.

FTS5 indexes the terms gateway/store/search.py made (space-separated), not the raw text, so
its tokenizer sees only words it keeps whole and matches exactly what the Redis index does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gateway.store.search import PruneResult, SearchDoc, SearchIndex

if TYPE_CHECKING:
    from gateway.store.embedded import EmbeddedStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS search_docs (
    rowid INTEGER PRIMARY KEY,
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

_CHUNK = 500  # rows per DELETE ... IN (...), under SQLite's bound-parameter limit


class EmbeddedSearch(SearchIndex):
    def __init__(self, store: EmbeddedStore) -> None:
        self._store = store

    async def add(self, doc: SearchDoc) -> None:
        with self._store.transaction():
            old = self._store.query("SELECT rowid FROM search_docs WHERE id = ?1", (doc.id,))
            if old:
                self._delete_rows([old[0][0]])
            row = self._store.query(
                "INSERT INTO search_docs (id, chat, session, ts, doc) VALUES (?1, ?2, ?3, ?4, ?5) "
                "RETURNING rowid",
                (doc.id, doc.chat, doc.session, doc.ts, doc.encode()),
            )
            self._store.query(
                "INSERT INTO search_fts (rowid, terms) VALUES (?1, ?2)",
                (row[0][0], " ".join(doc.terms)),
            )

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
