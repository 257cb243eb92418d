"""web_extract and web_crawl: the main content of pages as Markdown (trafilatura finds it, so
menus, footers and ads stay out), for a few given URLs or breadth-first over one site.

Every request goes through `WebFetcher`, so the SSRF guard, the size limit and the time
limit of web_fetch apply to each page and to each robots.txt.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections import deque
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

from pydantic import Field

from gateway.sdk import ToolContext, ToolError, ToolFamily, ToolSpec, untrusted
from tools.args import ToolArgs
from tools.web.fetch import (
    GROUP,
    USER_AGENT,
    HTTPStatusError,
    RawPage,
    WebFetcher,
    html_to_markdown,
)

MAX_URLS = 5
MAX_CRAWL_PAGES = 20
CRAWL_SECONDS = 90.0  # a crawl stops and reports what it has after this long
CRAWL_CONCURRENCY = 3  # pages fetched at once (per crawl)
MAX_CRAWL_DELAY = 5.0  # a robots.txt Crawl-delay above this is capped
_HTML = frozenset({"text/html", "application/xhtml+xml"})
# Links to these are not pages; fetching them would only be refused.
_NOT_PAGES = (
    ".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".ico", ".pdf", ".zip", ".gz", ".tgz",
    ".tar", ".mp3", ".mp4", ".webm", ".avi", ".mov", ".exe", ".dmg", ".iso", ".woff", ".woff2",
    ".ttf", ".css", ".js", ".xml", ".rss", ".atom",
)  # fmt: skip
_DISALLOW_ALL = ["User-agent: *", "Disallow: /"]


def extract_available() -> bool:
    return importlib.util.find_spec("trafilatura") is not None


class WebExtractArgs(ToolArgs):
    urls: list[str] = Field(
        min_length=1, max_length=MAX_URLS, description=f"1 to {MAX_URLS} http(s) URLs."
    )


class WebCrawlArgs(ToolArgs):
    url: str = Field(description="The page to start from.")
    max_pages: int = Field(default=10, ge=1, le=MAX_CRAWL_PAGES)
    same_site: bool = Field(
        default=True, description="Follow only links to the start page's site (subdomains too)."
    )


@dataclass(frozen=True)
class Extract:
    url: str  # after redirects
    title: str
    text: str  # Markdown
    links: tuple[str, ...] = ()  # absolute http(s) links in the page, fragments removed


async def extract_page(fetcher: WebFetcher, url: str, *, want_links: bool = False) -> Extract:
    page = await fetcher.fetch_raw(url)
    return await asyncio.to_thread(_extract, page, want_links)


def _extract(page: RawPage, want_links: bool) -> Extract:
    if page.content_type not in _HTML:
        return Extract(page.url, "", page.text.strip())
    import trafilatura

    title = ""
    metadata = trafilatura.extract_metadata(page.text, default_url=page.url)
    if metadata is not None and metadata.title:
        title = " ".join(metadata.title.split())
    text = trafilatura.extract(
        page.text,
        url=page.url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_comments=False,
        favor_recall=True,
    )
    if not text:
        # Tiny or unusual pages have no "main content" to find; their text is small anyway.
        text = html_to_markdown(page.text, page.url)
    links = _links(page.text, page.url) if want_links else ()
    return Extract(page.url, title, text.strip(), links)


class _LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "base" and self.base is None and values.get("href"):
            self.base = values["href"]
        elif tag in ("a", "area") and values.get("href"):
            rel = (values.get("rel") or "").lower().split()
            if "nofollow" not in rel:
                self.hrefs.append(str(values["href"]))


def _links(html: str, page_url: str) -> tuple[str, ...]:
    parser = _LinkParser()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # HTMLParser is lenient; this guards against the rare assertion
        pass
    base = urljoin(page_url, parser.base) if parser.base else page_url
    out: dict[str, None] = {}
    for href in parser.hrefs:
        url = urldefrag(urljoin(base, href.strip()))[0]
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") and parts.hostname:
            out[url] = None
    return tuple(out)


def _site(host: str) -> str:
    return host.lower().removeprefix("www.")


def _on_site(url: str, site: str) -> bool:
    host = _site(urlsplit(url).hostname or "")
    return host == site or host.endswith("." + site)


def _looks_like_page(url: str) -> bool:
    path = urlsplit(url).path.lower()
    return not path.endswith(_NOT_PAGES)


class RobotsCache:
    """robots.txt per origin, fetched once per crawl through the guarded fetcher.

    RFC 9309: a 4xx answer (no file) allows everything; a 5xx or no answer at all means
    the site may not be crawled.
    """

    def __init__(self, fetcher: WebFetcher) -> None:
        self._fetcher = fetcher
        self._rules: dict[str, RobotFileParser] = {}
        self._agent = USER_AGENT.split("/", 1)[0]

    async def rules(self, url: str) -> RobotFileParser:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self._rules:
            parser = RobotFileParser(origin + "/robots.txt")
            try:
                page = await self._fetcher.fetch_raw(origin + "/robots.txt")
                parser.parse(page.text.splitlines())
            except HTTPStatusError as exc:
                parser.parse(_DISALLOW_ALL if exc.status >= 500 else [])
            except ToolError:
                parser.parse(_DISALLOW_ALL)
            self._rules[origin] = parser
        return self._rules[origin]

    async def allowed(self, url: str) -> bool:
        return (await self.rules(url)).can_fetch(self._agent, url)

    async def delay(self, url: str) -> float:
        rules = await self.rules(url)
        value = rules.crawl_delay(self._agent)
        return min(float(value), MAX_CRAWL_DELAY) if value else 0.0


@dataclass
class CrawlResult:
    pages: list[Extract]
    failed: list[str]  # "url: reason"
    disallowed: int  # links robots.txt kept us from
    stopped_early: str = ""  # why the crawl ended before max_pages, if it did


async def crawl(
    fetcher: WebFetcher,
    start: str,
    *,
    max_pages: int,
    same_site: bool,
    deadline_seconds: float = CRAWL_SECONDS,
) -> CrawlResult:
    """Breadth-first from `start`: pages in the order they were found, at most `max_pages`."""
    start_parts = urlsplit(start.strip())
    if start_parts.scheme not in ("http", "https") or not start_parts.hostname:
        raise ToolError(f"only http:// and https:// URLs can be crawled, not {start[:100]!r}.")
    site = _site(start_parts.hostname)
    robots = RobotsCache(fetcher)
    result = CrawlResult([], [], 0)
    start_url = urldefrag(start.strip())[0]
    if not await robots.allowed(start_url):
        raise ToolError(
            f"the robots.txt of {start_parts.netloc} does not allow crawling {start_url} (or it "
            "could not be read); use web_fetch or web_extract for single pages."
        )
    queue: deque[str] = deque([start_url])
    seen = {start_url}
    deadline = time.monotonic() + deadline_seconds
    delay = await robots.delay(start_url)
    width = 1 if delay else CRAWL_CONCURRENCY

    async def visit(url: str) -> Extract | None:
        try:
            return await extract_page(fetcher, url, want_links=True)
        except ToolError as exc:
            result.failed.append(f"{url}: {exc}")
            return None

    while queue and len(result.pages) < max_pages:
        if time.monotonic() >= deadline:
            result.stopped_early = f"the crawl hit its {deadline_seconds:.0f} s limit"
            break
        batch = [
            queue.popleft() for _ in range(min(width, len(queue), max_pages - len(result.pages)))
        ]
        remaining = max(deadline - time.monotonic(), 0.1)
        tasks = [asyncio.ensure_future(visit(url)) for url in batch]
        done, pending = await asyncio.wait(tasks, timeout=remaining)
        for task in pending:
            task.cancel()
        for task in tasks:
            page = task.result() if task in done else None
            if page is None:
                continue
            result.pages.append(page)
            for link in page.links:
                if link in seen or (same_site and not _on_site(link, site)):
                    continue
                seen.add(link)
                if not _looks_like_page(link):
                    continue
                if not await robots.allowed(link):
                    result.disallowed += 1
                    continue
                queue.append(link)
        if delay and queue:
            await asyncio.sleep(delay)
    if not result.stopped_early and len(result.pages) < max_pages and not queue:
        result.stopped_early = "no more links to follow"
    return result


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + "\n[... cut; use web_fetch with an offset for the rest]"


class WebExtractTools(ToolFamily):
    """web_extract and web_crawl through `fetcher` (its guard and limits); offered only when
    trafilatura is installed (`extract_available`)."""

    name = "web_extract"

    def __init__(
        self, fetcher: WebFetcher, *, max_chars: int = 16000, fetch_timeout: float = 20.0
    ) -> None:
        self.fetcher = fetcher
        self.max_chars = max_chars
        self.fetch_timeout = fetch_timeout

    async def web_extract(self, args: WebExtractArgs, ctx: ToolContext) -> str:
        urls = list(dict.fromkeys(u.strip() for u in args.urls if u.strip()))
        if not urls:
            raise ToolError("give at least one URL.")
        outcomes = await asyncio.gather(
            *(extract_page(self.fetcher, url) for url in urls), return_exceptions=True
        )
        share = max(self.max_chars // len(urls), 500)
        parts = []
        for url, outcome in zip(urls, outcomes, strict=True):
            if isinstance(outcome, ToolError):
                parts.append(f"## {url}\nerror: {outcome}")
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                heading = outcome.title or outcome.url
                body = _cut(outcome.text, share) or "(no text found)"
                parts.append(f"## {heading}\nURL: {outcome.url}\n\n{body}")
        return "\n\n".join(parts)

    async def web_crawl(self, args: WebCrawlArgs, ctx: ToolContext) -> str:
        result = await crawl(
            self.fetcher, args.url, max_pages=args.max_pages, same_site=args.same_site
        )
        head = [f"Crawled {len(result.pages)} page(s) from {args.url} (robots.txt honoured)."]
        if result.disallowed:
            head.append(
                f"{result.disallowed} link(s) skipped: their robots.txt disallows them "
                "or could not be read."
            )
        if result.failed:
            head.append(f"{len(result.failed)} page(s) failed: " + "; ".join(result.failed[:5]))
        if result.stopped_early:
            head.append(f"Stopped: {result.stopped_early}.")
        share = max(self.max_chars // max(len(result.pages), 1), 300)
        parts = [" ".join(head)]
        for page in result.pages:
            parts.append(
                f"## {page.title or page.url}\nURL: {page.url}\n\n{_cut(page.text, share)}"
            )
        return "\n\n".join(parts)

    def specs(self) -> list[ToolSpec[Any]]:
        if not extract_available():
            return []
        return [
            ToolSpec(
                name="web_extract",
                description=(
                    f"The main content (article text, not menus or ads) of 1 to {MAX_URLS} web "
                    "pages as Markdown, fetched at once."
                ),
                args=WebExtractArgs,
                handler=self.web_extract,
                group=GROUP,
                untrusted_output=True,
                page_links=True,
                side_effects=untrusted.unseen_urls_check("web_extract", lambda a: a.urls),
                timeout=self.fetch_timeout + 10,
            ),
            ToolSpec(
                name="web_crawl",
                description=(
                    "Read a website breadth-first from a start page, following its links "
                    "(robots.txt "
                    "honoured); returns each page's title and main content."
                ),
                args=WebCrawlArgs,
                handler=self.web_crawl,
                group=GROUP,
                untrusted_output=True,
                page_links=True,
                side_effects=untrusted.unseen_urls_check("web_crawl", lambda a: [a.url]),
                timeout=CRAWL_SECONDS + self.fetch_timeout + 10,
            ),
        ]
