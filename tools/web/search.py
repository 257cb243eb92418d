"""The web_search tool behind a small provider protocol, with SearXNG and Brave implementations.

The provider's URL is chosen by the operator (often a SearXNG on the same host), so it is
not put through the SSRF guard that protects web_fetch from model-chosen URLs.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from pydantic import Field

from gateway.sdk import ToolContext, ToolError, ToolFamily, ToolSpec, ToolsSettings, inline_code
from tools.args import ToolArgs

GROUP = "web"
BRAVE_URL = "https://api.search.brave.com"
NOT_CONFIGURED = (
    "web search is not configured on this gateway, so it cannot be used; answer from what you "
    "know or fetch a known URL with web_fetch. (Operator: set tools.web_search_provider to "
    "'searxng' with tools.web_search_url, or 'brave' with tools.web_search_api_key.)"
)
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str = ""


class SearchProvider(Protocol):
    name: str

    async def search(self, query: str, count: int) -> list[SearchResult]:
        """Up to `count` results; raises ToolError with a sentence the model can act on."""
        ...


class SearxngProvider:
    """A SearXNG instance's JSON API (`format=json` must be enabled in its settings.yml)."""

    name = "searxng"

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 15.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._api = _JsonApi(self.name, timeout, transport)

    async def search(self, query: str, count: int) -> list[SearchResult]:
        data = await self._api.get(f"{self._base}/search", {"q": query, "format": "json"})
        items = data.get("results") if isinstance(data, dict) else None
        return [
            SearchResult(_clean(r.get("title")), str(r["url"]), _clean(r.get("content")))
            for r in (items or [])[:count]
            if isinstance(r, dict) and r.get("url")
        ]


class BraveProvider:
    """Brave Search API (`/res/v1/web/search`), authenticated by a subscription token."""

    name = "brave"

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = BRAVE_URL,
        timeout: float = 15.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._key = api_key
        self._base = (base_url or BRAVE_URL).rstrip("/")
        self._api = _JsonApi(self.name, timeout, transport)

    async def search(self, query: str, count: int) -> list[SearchResult]:
        data = await self._api.get(
            f"{self._base}/res/v1/web/search",
            {"q": query, "count": str(count)},
            {"X-Subscription-Token": self._key},
        )
        web = data.get("web") if isinstance(data, dict) else None
        items = web.get("results") if isinstance(web, dict) else None
        return [
            SearchResult(_clean(r.get("title")), str(r["url"]), _clean(r.get("description")))
            for r in (items or [])[:count]
            if isinstance(r, dict) and r.get("url")
        ]


def provider_from_settings(
    settings: ToolsSettings, *, transport: httpx.AsyncBaseTransport | None = None
) -> SearchProvider | None:
    kind = settings.web_search_provider
    timeout = settings.web_timeout
    if kind == "searxng":
        return SearxngProvider(settings.web_search_url, timeout=timeout, transport=transport)
    if kind == "brave":
        return BraveProvider(
            settings.web_search_api_key.get_secret_value(),
            base_url=settings.web_search_url or BRAVE_URL,
            timeout=timeout,
            transport=transport,
        )
    return None


@dataclass(frozen=True)
class _JsonApi:
    """GET a JSON API and turn every failure into one sentence for the model."""

    provider: str
    timeout: float
    transport: httpx.AsyncBaseTransport | None

    async def get(
        self, url: str, params: dict[str, str], headers: dict[str, str] | None = None
    ) -> Any:
        try:
            async with httpx.AsyncClient(timeout=self.timeout, transport=self.transport) as client:
                response = await client.get(
                    url, params=params, headers={"Accept": "application/json", **(headers or {})}
                )
        except httpx.TimeoutException:
            raise ToolError(
                f"the {self.provider} search did not answer in time; try again."
            ) from None
        except httpx.HTTPError as exc:
            raise ToolError(
                f"the {self.provider} search could not be reached ({exc}); try later."
            ) from None
        return _decode(self.provider, response)


def _decode(provider: str, response: httpx.Response) -> Any:
    status = response.status_code
    if status in (401, 403):
        raise ToolError(
            f"the {provider} search refused the request (HTTP {status}); the operator must check "
            "its API key or, for SearXNG, enable the json format. Answer without searching."
        )
    if status == 429:
        raise ToolError(f"the {provider} search is rate limited; wait a minute before searching.")
    if status >= 400:
        raise ToolError(f"the {provider} search failed (HTTP {status}); try again later.")
    try:
        return response.json()
    except ValueError:
        raise ToolError(f"the {provider} search returned something that is not JSON.") from None


def _clean(value: object) -> str:
    text = html.unescape(_TAG.sub("", str(value or "")))
    return " ".join(text.split())


class WebSearchArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=400, description="What to search for.")
    count: int = Field(default=5, ge=1, le=10, description="How many results.")


def format_results(query: str, results: Sequence[SearchResult]) -> str:
    if not results:
        # Not the query again: search results give URLs after outside content, and a query
        # echoed back would make any address the model wrote into it look given.
        return "no results; try other words."
    lines = []
    for number, result in enumerate(results, 1):
        lines.append(f"{number}. {result.title or result.url}\n   {result.url}")
        if result.snippet:
            lines.append(f"   {result.snippet[:400]}")
    return "\n".join(lines)


class WebSearchTools(ToolFamily):
    """web_search on the configured provider; without one it tells the model it cannot search."""

    name = "web_search"

    def __init__(self, provider: SearchProvider | None) -> None:
        self.provider = provider

    async def web_search(self, args: WebSearchArgs, ctx: ToolContext) -> str:
        if self.provider is None:
            raise ToolError(NOT_CONFIGURED)
        return format_results(args.query, await self.provider.search(args.query, args.count))

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="web_search",
                description=(
                    "Search the web. Returns titles, URLs and snippets; read a result with "
                    "web_fetch."
                ),
                args=WebSearchArgs,
                handler=self.web_search,
                group=GROUP,
                untrusted_output=True,
                page_links=True,
                progress=lambda args: f"Searching the web for {inline_code(args.query)}",
            )
        ]
