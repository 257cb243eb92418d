"""Fixtures for the fake servers every end-to-end test talks to (tests/fakes/)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.llm import ScriptedLLM
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeBotAPI


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # slack_sdk reads these and ignores NO_PROXY, so 127.0.0.1 calls would go to a proxy.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def llm() -> AsyncIterator[ScriptedLLM]:
    """The scripted OpenAI-compatible server; push Replies or set a responder."""
    async with ScriptedLLM() as server:
        yield server


@pytest.fixture
async def tg() -> AsyncIterator[FakeBotAPI]:
    async with FakeBotAPI() as server:
        yield server


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server
