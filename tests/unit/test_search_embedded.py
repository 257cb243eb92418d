"""The embedded search index writes a turn's document with the turn and its terms in batches:
reads never miss a staged document, a crash loses none, and a document deleted before its
terms were indexed leaves nothing behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.store import search_embedded
from gateway.store.embedded import EmbeddedStore
from gateway.store.search import SearchDoc, query_terms

CHAT = "telegram:100"


def doc(n: int, text: str, chat: str = CHAT) -> SearchDoc:
    return SearchDoc.build(f"t{n:03}", chat, chat, 1000.0 + n, text)


def fts_rows(store: EmbeddedStore) -> int:
    return int(store.query("SELECT COUNT(*) FROM search_fts")[0][0])


async def found(store: EmbeddedStore, query: str) -> list[str]:
    return [d.id for d in await store.search.search(query_terms(query), chat=None)]


async def test_a_staged_document_is_found_before_its_batch_is_written(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    await store.search.add(doc(1, "the postgres backup"))
    assert fts_rows(store) == 0  # waiting for its batch
    assert await found(store, "postgres") == ["t001"]  # a read indexes what is staged first
    assert fts_rows(store) == 1
    await store.close()


async def test_terms_follow_in_batches_of_their_own(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    for n in range(search_embedded._BATCH - 1):
        await store.search.add(doc(n, f"note {n}"))
    await asyncio.sleep(0)
    assert fts_rows(store) == 0
    await store.search.add(doc(999, "the one that fills the batch"))
    await asyncio.sleep(0.05)  # a full batch is written at once, not after the delay
    assert fts_rows(store) == search_embedded._BATCH
    await store.search.add(doc(1000, "a lone one"))
    await asyncio.sleep(search_embedded._DELAY + 0.2)  # a lone document waits the delay only
    assert fts_rows(store) == search_embedded._BATCH + 1
    await store.close()


async def test_a_crash_before_the_batch_loses_no_document(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    await store.search.add(doc(1, "indexed before the crash"))
    assert await found(store, "crash") == ["t001"]
    await store.search.add(doc(2, "staged at the crash"))
    await store.search.add(doc(3, "also staged at the crash"))
    store.abandon()  # the process dies: no close, the staged terms are gone from memory

    again = EmbeddedStore(tmp_path)
    assert fts_rows(again) == 3  # opening indexed the two documents without terms
    assert await found(again, "crash") == ["t003", "t002", "t001"]
    await again.close()


async def test_a_document_deleted_before_its_terms_leaves_nothing(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    await store.search.add(doc(1, "secret plans", chat="telegram:7"))
    await store.search.add(doc(2, "first draft"))
    await store.search.add(doc(2, "second draft"))  # the turn ran again: replaced
    assert await store.search.forget_chat("telegram:7") == 1
    await store.close()  # indexes what is staged

    again = EmbeddedStore(tmp_path)
    assert fts_rows(again) == 1  # only the second draft: no terms of deleted documents
    assert await found(again, "secret") == []
    assert await found(again, "draft") == ["t002"]
    assert await found(again, "first") == []
    await again.close()
