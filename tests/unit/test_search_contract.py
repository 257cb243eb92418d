"""The search index contract: SQLite FTS5 (embedded) and the Redis inverted index (a real
redis-server and fakeredis) give the same results for the same documents and queries."""

from __future__ import annotations

import pytest

from gateway.store.base import Store
from gateway.store.search import SearchDoc, query_terms, terms

# The fakeredis fixture of the Store contract; the others come from tests/fixtures_redis.py.
from tests.unit.test_store_contract import fakeredis_store  # noqa: F401

A, B = "telegram:100", "slack:C9"


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("sentinel", marks=pytest.mark.redis),
        pytest.param("cluster", marks=pytest.mark.redis),
        "fakeredis",
        "embedded",
    ]
)
def backend(request: pytest.FixtureRequest) -> Store:
    fixture: Store = request.getfixturevalue(f"{request.param}_store")
    return fixture


DOCS = [
    SearchDoc.build("t01", "telegram:100", A, 1000.0, "We moved the database to Postgres 16."),
    SearchDoc.build("t02", "telegram:100", A, 1001.0, "Ana prefers tabs; Café opens at nine."),
    SearchDoc.build("t03", "telegram:100:u7", A, 1002.0, "the Postgres backup runs nightly"),
    SearchDoc.build("t04", "slack:C9", B, 1003.0, "postgres password rotation is on Fridays"),
    # Same time as t05: ties come back by id, larger first, on every backend.
    SearchDoc.build("t06", "telegram:100", A, 1004.0, "ran `git status`: 3 files modified"),
    SearchDoc.build("t05", "telegram:100", A, 1004.0, "git push failed: postgres was down"),
    SearchDoc.build("t07", "slack:C9", B, 1005.0, "日本語 テキスト and naïve façade ½ ①"),
]


async def fill(backend: Store) -> None:
    for doc in DOCS:
        await backend.search.add(doc)


async def ids(store: Store, query: str, **where: object) -> list[str]:
    found = await store.search.search(query_terms(query), **where)  # type: ignore[arg-type]
    return [doc.id for doc in found]


def test_terms_are_case_and_accent_free_and_distinct() -> None:
    assert terms("Café CAFE cafe, naïve x 12 a_b") == ["cafe", "naive", "12"]
    assert terms("ab " + "z" * 41) == ["ab"]
    with pytest.raises(ValueError, match="no searchable word"):
        query_terms("a ! ?")


async def test_results_by_scope_newest_first(backend: Store) -> None:
    await fill(backend)
    assert await ids(backend, "postgres", chat=A) == ["t05", "t03", "t01"]
    assert await ids(backend, "POSTGRES", chat=None) == ["t05", "t04", "t03", "t01"]
    assert await ids(backend, "postgres", chat=B) == ["t04"]
    assert await ids(backend, "postgres", chat=A, session="telegram:100") == ["t05", "t01"]
    assert await ids(backend, "postgres", chat=A, limit=2) == ["t05", "t03"]
    assert await ids(backend, "git", chat=A) == ["t06", "t05"]  # equal times: larger id first


async def test_every_term_must_match(backend: Store) -> None:
    await fill(backend)
    assert await ids(backend, "postgres backup", chat=A) == ["t03"]
    assert await ids(backend, "postgres tabs", chat=None) == []
    assert await ids(backend, "cafe", chat=A) == ["t02"]  # "Café" in the text
    assert await ids(backend, "nothing-like-this", chat=None) == []


async def test_unicode_words_match_alike(backend: Store) -> None:
    await fill(backend)
    assert await ids(backend, "日本語", chat=B) == ["t07"]
    assert await ids(backend, "NAIVE facade", chat=None) == ["t07"]
    assert await ids(backend, "テキスト", chat=None) == ["t07"]


async def test_a_document_added_again_is_replaced(backend: Store) -> None:
    await fill(backend)
    again = SearchDoc.build("t01", "telegram:100", A, 1006.0, "We moved the queue to Redis.")
    await backend.search.add(again)
    assert await ids(backend, "database", chat=A) == []
    assert await ids(backend, "redis", chat=A) == ["t01"]
    assert await backend.search.count(A) == 5


async def test_forget_chat_removes_only_that_chat(backend: Store) -> None:
    await fill(backend)
    assert await backend.search.forget_chat(A) == 5
    assert await ids(backend, "postgres", chat=None) == ["t04"]
    assert await ids(backend, "git", chat=A) == []
    assert await backend.search.count(A) == 0 and await backend.search.count() == 2
    pruned = await backend.search.prune(2000.0)
    assert pruned.sessions == ["slack:C9"]  # the forgotten chat's sessions are gone already


async def test_prune_removes_old_documents_and_reports_idle_sessions(backend: Store) -> None:
    await fill(backend)
    result = await backend.search.prune(1003.5)
    assert result.docs == 4
    assert result.sessions == ["telegram:100:u7"]
    assert await ids(backend, "postgres", chat=None) == ["t05"]
    assert await backend.search.count() == 3
    assert (await backend.search.prune(1003.5)).docs == 0


async def test_snippet_shows_the_matching_words() -> None:
    long = "intro " * 60 + "the Café on Main Street is where we met " + "outro " * 60
    doc = SearchDoc.build("x", "s", "c", 1.0, long)
    snippet = doc.snippet(query_terms("cafe"))
    assert "Café on Main Street" in snippet
    assert snippet.startswith("… ") and snippet.endswith(" …")
    assert len(snippet) < 260


def test_a_document_survives_encoding_whole() -> None:
    import dataclasses
    import json

    doc = DOCS[-1]
    assert SearchDoc.decode(doc.encode()) == doc
    # Every field is written: a field added to SearchDoc must be added to encode too.
    assert set(json.loads(doc.encode())) == {f.name for f in dataclasses.fields(SearchDoc)}
