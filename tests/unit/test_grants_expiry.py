"""An "always" grant lasts as long as approvals.always_expires_days says, and says so."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from gateway.approvals.grants import GrantBook, _listing
from gateway.approvals.seals import EntrySigner
from gateway.config import load_settings
from gateway.store.embedded import EmbeddedStore

SIGNER = EntrySigner(b"grants test key!" * 2)
SESSION, CHAT = "telegram:-100:uana", "telegram:-100"
SHAPE = "rm -f -r /ws/build"


@pytest_asyncio.fixture
async def grants(tmp_path: Path) -> AsyncIterator[GrantBook]:
    store = EmbeddedStore(tmp_path / "store")
    try:
        yield GrantBook(store, SIGNER)
    finally:
        await store.close()


async def always(book: GrantBook, until: float) -> None:
    await book.add(
        "chat",
        CHAT,
        owner="telegram:ana",
        owner_label="Ana",
        tool="shell",
        shape=SHAPE,
        command="rm -rf build",
        by="telegram:admin",
        by_label="Admin",
        until=until,
    )


async def test_an_always_grant_ends_at_its_expiry(grants: GrantBook) -> None:
    await always(grants, until=time.time() - 1)
    assert await grants.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is None
    assert await grants.listing(SESSION, CHAT) == []
    await always(grants, until=time.time() + 3600)
    found = await grants.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE)
    assert found is not None and found.until > time.time()


async def test_the_listing_shows_the_expiry_or_that_there_is_none(grants: GrantBook) -> None:
    await always(grants, until=time.mktime((2099, 1, 2, 12, 0, 0, 0, 0, 0)) - time.timezone)
    listed = _listing(await grants.listing(SESSION, CHAT))
    assert "always in this chat until 2099-01-02 12:00 UTC" in listed
    await always(grants, until=0.0)
    listed = _listing(await grants.listing(SESSION, CHAT))
    assert "always in this chat;" in listed and "until" not in listed


def test_the_expiry_is_a_setting_with_a_default() -> None:
    assert load_settings().approvals.always_expires_days == 30
    assert load_settings(approvals={"always_expires_days": 0}).approvals.always_expires_days == 0
