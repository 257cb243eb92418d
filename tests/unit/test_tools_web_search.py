"""web_search: SearXNG and Brave against local fake APIs, errors, and the unconfigured case."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from gateway.config import ConfigError, ToolsSettings, load_settings
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError
from gateway.sessions.key import SessionKey
from tools.web.search import (
    NOT_CONFIGURED,
    BraveProvider,
    SearxngProvider,
    WebSearchTools,
    provider_from_settings,
)

CTX = ToolContext(
    session=SessionKey("console", "t"),
    chat=ChatRef(platform="console", chat_id="t"),
    user=UserRef(platform="console", user_id="u"),
)


class SearchApi:
    """Fake SearXNG (`/search`) and Brave (`/res/v1/web/search`) endpoints."""

    def __init__(self) -> None:
        self.requests: list[web.Request] = []
        self.status = 200
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/search", self._searxng)
        app.router.add_get("/res/v1/web/search", self._brave)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _searxng(self, request: web.Request) -> web.Response:
        self.requests.append(request)
        if self.status != 200:
            return web.Response(status=self.status)
        results = [
            {"url": f"https://example.org/{i}", "title": f"Result {i}", "content": "a &amp; b"}
            for i in range(8)
        ]
        return web.json_response({"query": request.query["q"], "results": results})

    async def _brave(self, request: web.Request) -> web.Response:
        self.requests.append(request)
        if request.headers.get("X-Subscription-Token") != "key-1":
            return web.json_response({"error": "bad token"}, status=401)
        count = int(request.query["count"])
        results = [
            {"url": f"https://brave.test/{i}", "title": f"<b>B{i}</b>", "description": "x <b>y</b>"}
            for i in range(count)
        ]
        return web.json_response({"web": {"results": results}})


@pytest_asyncio.fixture
async def api() -> AsyncIterator[SearchApi]:
    server = SearchApi()
    await server.start()
    yield server
    await server.stop()


async def run(provider: Any, query: str = "chatgate", count: int = 5) -> str:
    (spec,) = WebSearchTools(provider).specs()
    return await spec.handler(spec.args(query=query, count=count), CTX)


async def test_searxng(api: SearchApi) -> None:
    out = await run(SearxngProvider(api.url + "/"), "llm gateway", 2)
    assert out == (
        "1. Result 0\n   https://example.org/0\n   a & b\n"
        "2. Result 1\n   https://example.org/1\n   a & b"
    )
    (request,) = api.requests
    assert request.query["format"] == "json" and request.query["q"] == "llm gateway"


async def test_searxng_with_json_disabled(api: SearchApi) -> None:
    api.status = 403
    with pytest.raises(ToolError, match=r"refused the request \(HTTP 403\).*json format"):
        await run(SearxngProvider(api.url))


async def test_brave(api: SearchApi) -> None:
    out = await run(BraveProvider("key-1", base_url=api.url), count=3)
    assert out.splitlines()[:3] == ["1. B0", "   https://brave.test/0", "   x y"]
    assert out.count("https://brave.test/") == 3


async def test_brave_bad_key(api: SearchApi) -> None:
    with pytest.raises(ToolError, match=r"HTTP 401.*API key"):
        await run(BraveProvider("wrong", base_url=api.url))


async def test_unreachable_provider() -> None:
    with pytest.raises(ToolError, match="could not be reached"):
        await run(SearxngProvider("http://127.0.0.1:9"))


async def test_not_configured_is_a_clear_error() -> None:
    with pytest.raises(ToolError) as err:
        await run(None)
    assert str(err.value) == NOT_CONFIGURED
    assert provider_from_settings(ToolsSettings()) is None


def test_settings_pick_the_provider() -> None:
    searx = ToolsSettings(web_search_provider="searxng", web_search_url="http://s:8888")
    assert isinstance(provider_from_settings(searx), SearxngProvider)
    brave = ToolsSettings(web_search_provider="brave", web_search_api_key="k")
    assert isinstance(provider_from_settings(brave), BraveProvider)


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ({"web_search_provider": "searxng"}, "needs tools.web_search_url"),
        ({"web_search_provider": "brave"}, "needs tools.web_search_api_key"),
    ],
)
def test_incomplete_provider_settings_fail_at_load(tools: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(None, tools=tools)
