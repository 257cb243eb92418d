"""web_extract and web_crawl against a small local site with a robots.txt, under the SSRF guard."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError
from gateway.sessions.key import SessionKey
from tests.fakes.server import LocalServer
from tests.fakes.web_pages import InternalServer
from tools.web.extract import WebExtractTools, crawl, extract_available
from tools.web.fetch import WebFetcher
from tools.web.netguard import Address, AddressGuard

if not extract_available():
    pytest.skip(
        "web_extract needs trafilatura (pip install 'chatgate[extract]')", allow_module_level=True
    )

CTX = ToolContext(
    session=SessionKey("console", "t"),
    chat=ChatRef(platform="console", chat_id="t"),
    user=UserRef(platform="console", user_id="u"),
)
ARTICLE = (
    "Lighthouses guided ships along dangerous coasts for centuries. Their keepers trimmed "
    "wicks, polished lenses and logged the weather through long winter nights. "
)


def page(title: str, body: str, links: str = "") -> str:
    return f"""<!doctype html><html><head><title>{title}</title></head><body>
<nav><a href="/">Home</a> <a href="/a">Site navigation menu</a></nav>
<main><article><h1>{title}</h1><p>{body * 3}</p><p>{body}</p>{links}</article></main>
<footer>Copyright footer, all rights reserved. <a href="/about-us">About</a></footer>
</body></html>"""


class Site(LocalServer):
    def __init__(self, robots_status: int = 200) -> None:
        super().__init__()
        self.hits: list[str] = []
        self.robots_status = robots_status

    def routes(self, app: web.Application) -> None:
        app.middlewares.append(self._record)

        def port() -> int:  # the port is known only after start
            return self.port

        pages = {
            "/": lambda: page(
                "Start",
                ARTICLE,
                '<a href="/a">A</a> <a href="/b#part">B</a> <a href="/private/secret">secret</a>'
                f' <a href="http://other.test:{port()}/c">other</a> <a href="/manual.pdf">pdf</a>'
                ' <a href="mailto:x@y.test">mail</a> <a href="/a" rel="nofollow">again</a>',
            ),
            "/a": lambda: page("Page A", "Alpha pages talk about anchors. ", '<a href="/c">C</a>'),
            "/b": lambda: page("Page B", "Beta pages talk about buoys. ", '<a href="/">start</a>'),
            "/c": lambda: page("Page C", "Gamma pages talk about cliffs. "),
            "/about-us": lambda: page("About", "We are a small museum. "),
            "/private/secret": lambda: page("Secret", "Robots may not read this. "),
            "/long": lambda: page("Long", ARTICLE * 200),
        }
        for path, make in pages.items():
            app.router.add_get(path, self._serve(make))
        app.router.add_get("/robots.txt", self._robots)

    @staticmethod
    def _serve(make: Any) -> Any:
        async def handle(request: web.Request) -> web.Response:
            return web.Response(text=make(), content_type="text/html")

        return handle

    async def _robots(self, request: web.Request) -> web.Response:
        rules = "User-agent: *\nDisallow: /private/\nDisallow: /about-us\n"
        return web.Response(text=rules, status=self.robots_status)

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.hits.append(request.path)
        response: web.StreamResponse = await handler(request)
        return response


@pytest_asyncio.fixture
async def site() -> AsyncIterator[Site]:
    async with Site() as server:
        yield server


def fetcher(resolved: list[str] | None = None, **kwargs: Any) -> WebFetcher:
    names = {"docs.test": "127.0.0.1", "other.test": "127.0.0.1"}

    async def resolve(host: str, port: int) -> list[Address]:
        if resolved is not None:
            resolved.append(host)
        if host not in names:
            raise OSError("unknown")
        return [ipaddress.ip_address(names[host])]

    guard = AddressGuard(["docs.test", "other.test"], resolver=resolve)
    return WebFetcher(guard, **kwargs)


def tools(**kwargs: Any) -> dict[str, Any]:
    specs = WebExtractTools(fetcher(), **kwargs).specs()
    return {spec.name: spec for spec in specs}


async def run(spec: Any, **args: Any) -> str:
    return str(await spec.handler(spec.args(**args), CTX))


async def test_extract_gives_the_main_content_of_several_pages(site: Site) -> None:
    base = f"http://docs.test:{site.port}"
    async with InternalServer() as internal:
        out = await run(
            tools()["web_extract"],
            urls=[
                f"{base}/a",
                f"{base}/b",
                f"{base}/missing",
                f"http://127.0.0.1:{internal.port}/",
            ],
        )
        assert internal.hits == []
    sections = out.split("\n\n## ")
    assert sections[0].startswith(f"## Page A\nURL: {base}/a\n\n")
    assert "Alpha pages talk about anchors." in sections[0]
    assert sections[1].startswith(f"Page B\nURL: {base}/b\n\n")
    assert sections[2] == (
        f"{base}/missing\nerror: {base}/missing answered HTTP 404 Not Found; "
        "check the URL or try another page."
    )
    assert sections[3].startswith(f"http://127.0.0.1:{internal.port}/\nerror: refused: 127.0.0.1")
    assert "Site navigation menu" not in out and "Copyright footer" not in out
    assert sorted(site.hits) == ["/a", "/b", "/missing"]


async def test_extract_limits(site: Site) -> None:
    spec = tools(max_chars=4000)["web_extract"]
    out = await run(spec, urls=[f"http://docs.test:{site.port}/long"])
    assert out.endswith("[... cut; use web_fetch with an offset for the rest]")
    assert len(out) < 4000 + 200
    with pytest.raises(ValueError, match="at most 5 items"):
        spec.args(urls=[f"http://docs.test/{n}" for n in range(6)])


async def test_extract_is_concurrent_and_time_limited() -> None:
    started: list[float] = []
    release = asyncio.Event()

    class Slow(LocalServer):
        def routes(self, app: web.Application) -> None:
            async def slow(request: web.Request) -> web.Response:
                started.append(asyncio.get_running_loop().time())
                if len(started) == 3:
                    release.set()
                await asyncio.sleep(30)
                return web.Response(text="late")

            app.router.add_get("/{n}", slow)

    async with Slow() as slow:
        spec = WebExtractTools(fetcher(timeout=1.0)).specs()[0]
        out = await run(spec, urls=[f"http://docs.test:{slow.port}/{n}" for n in range(3)])
    # All three requests were in flight together; each then hit the time limit.
    assert release.is_set() and len(started) == 3
    assert out.count("did not answer within 1 s") == 3


async def test_crawl_is_breadth_first_and_honours_robots_txt(site: Site) -> None:
    resolved: list[str] = []
    base = f"http://docs.test:{site.port}"
    result = await crawl(fetcher(resolved), f"{base}/", max_pages=10, same_site=True)
    assert [p.url for p in result.pages] == [f"{base}/", f"{base}/a", f"{base}/b", f"{base}/c"]
    assert [p.title for p in result.pages] == ["Start", "Page A", "Page B", "Page C"]
    assert "Gamma pages talk about cliffs." in result.pages[3].text
    # /private/secret and /about-us are disallowed and were never requested; the PDF, the
    # mail link and the other site were not followed; robots.txt was read once.
    assert result.disallowed == 2
    assert sorted(site.hits) == sorted(["/robots.txt", "/", "/a", "/b", "/c"])
    assert "other.test" not in resolved
    assert result.stopped_early == "no more links to follow"


async def test_crawl_stops_at_max_pages_and_can_leave_the_site(site: Site) -> None:
    base = f"http://docs.test:{site.port}"
    out = await run(tools()["web_crawl"], url=f"{base}/", max_pages=2)
    assert out.startswith(f"Crawled 2 page(s) from {base}/ (robots.txt honoured).")
    assert "## Start\nURL: " in out and "## Page A\nURL: " in out and "Page B" not in out
    wide = await crawl(fetcher(), f"{base}/", max_pages=10, same_site=False)
    other = f"http://other.test:{site.port}/c"
    assert other in [p.url for p in wide.pages]
    assert site.hits.count("/robots.txt") == 3  # docs.test twice (two crawls), other.test once


async def test_crawl_refuses_blocked_and_disallowed_starts(site: Site) -> None:
    base = f"http://docs.test:{site.port}"
    with pytest.raises(ToolError, match="does not allow crawling"):
        await crawl(fetcher(), f"{base}/private/secret", max_pages=3, same_site=True)
    with pytest.raises(ToolError, match="only http:// and https://"):
        await crawl(fetcher(), "file:///etc/passwd", max_pages=3, same_site=True)
    async with InternalServer() as internal:
        with pytest.raises(ToolError, match="does not allow crawling"):
            # Its robots.txt is refused by the guard, which counts as "may not crawl".
            await crawl(
                fetcher(), f"http://127.0.0.1:{internal.port}/", max_pages=3, same_site=True
            )
        assert internal.hits == []
    assert "/private/secret" not in site.hits


@pytest.mark.parametrize(("status", "allowed"), [(404, True), (403, True), (503, False)])
async def test_robots_txt_errors(status: int, allowed: bool) -> None:
    async with Site(robots_status=status) as site:
        start = f"http://docs.test:{site.port}/"
        if allowed:
            result = await crawl(fetcher(), start, max_pages=10, same_site=True)
            # Without rules every link may be followed, /private/ and /about-us too.
            assert "/private/secret" in site.hits and result.disallowed == 0
        else:
            with pytest.raises(ToolError, match="does not allow crawling"):
                await crawl(fetcher(), start, max_pages=10, same_site=True)
            assert site.hits == ["/robots.txt"]
