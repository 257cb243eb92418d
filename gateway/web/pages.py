"""Rendering and serving the web pages: Jinja2 templates (autoescaped), the gateway's own
static files, and the security headers every page gets.

Nothing comes from a CDN: the style sheet and the one small script are files in the package,
served by the gateway itself, and the Content-Security-Policy allows nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from gateway.sdk.platforms import PlatformUnavailable

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "media-src 'self' blob:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class Templates:
    """A Jinja2 environment over the given template folders (earlier ones win by name)."""

    def __init__(self, *folders: Path) -> None:
        try:
            import jinja2
        except ImportError:  # the `web` extra
            raise PlatformUnavailable(
                "the web console and chat need Jinja2, which is not installed: "
                "pip install 'chatgate[web]'"
            ) from None
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([str(f) for f in (*folders, TEMPLATES)]),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._env.filters["ago"] = ago
        self._env.filters["until"] = until
        self._env.filters["utc"] = utc

    def render(self, name: str, **values: Any) -> str:
        return self._env.get_template(name).render(**values)

    def markup(self, name: str, **values: Any) -> Any:
        """Rendered HTML to place inside another template as it is."""
        from markupsafe import Markup

        return Markup(self.render(name, **values))


def page(html: str, status: int = 200) -> web.Response:
    return web.Response(
        text=html, status=status, content_type="text/html", headers=SECURITY_HEADERS
    )


def redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={**SECURITY_HEADERS, "Location": location})


def leave(location: str) -> web.HTTPSeeOther:
    """A redirect to raise from a helper (sign-in needed, ...)."""
    return web.HTTPSeeOther(location, headers=SECURITY_HEADERS)


def static_handler(folders: Iterable[Path]) -> Any:
    """A handler for `.../static/{name}` serving only the files in these folders."""
    files: dict[str, Path] = {}
    for folder in (*folders, STATIC):
        for path in folder.iterdir():
            if path.is_file():
                files.setdefault(path.name, path)

    async def serve(request: web.Request) -> web.StreamResponse:
        path = files.get(request.match_info["name"])
        if path is None:
            raise web.HTTPNotFound()
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        headers = {**SECURITY_HEADERS, "Cache-Control": "private, max-age=300"}
        return web.Response(body=path.read_bytes(), content_type=kind, headers=headers)

    return serve


class Streams:
    """The event streams open in this process, so stopping the gateway ends them at once
    instead of waiting for each browser to go away."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    @contextlib.contextmanager
    def track(self) -> Iterator[None]:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            yield
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def gone(request: web.Request) -> bool:
    """The browser closed the connection (aiohttp does not cancel the handler for it)."""
    transport = request.transport
    return transport is None or transport.is_closing()


def ago(ts: float | None) -> str:
    """`3 min ago`, for times in the past."""
    if not ts:
        return "-"
    return _span(time.time() - ts) + " ago"


def until(ts: float | datetime | None) -> str:
    """`in 3 min`, for times ahead (and `3 min ago` when already past)."""
    if ts is None:
        return "-"
    value = ts.timestamp() if isinstance(ts, datetime) else ts
    left = value - time.time()
    return f"in {_span(left)}" if left >= 0 else f"{_span(-left)} ago"


def utc(ts: float | datetime | None) -> str:
    if ts is None:
        return "-"
    moment = ts if isinstance(ts, datetime) else datetime.fromtimestamp(ts, UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(seconds: float) -> str:
    seconds = max(seconds, 0)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
