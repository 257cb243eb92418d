"""The agent's Markdown as safe HTML for the browser: raw HTML in the text is shown as text,
only http(s) and mailto links are kept, and the page's CSP loads nothing from elsewhere."""

from __future__ import annotations

import html
from functools import cache
from typing import Any


@cache
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = _safe_link  # type: ignore[method-assign]  # markdown-it's own hook
    return md


def _safe_link(url: str) -> bool:
    return url.strip().lower().startswith(("http://", "https://", "mailto:", "/chat/files/"))


def to_html(text: str, *, markdown: bool = True) -> str:
    if not markdown:
        return "<p>" + html.escape(text).replace("\n", "<br>\n") + "</p>"
    rendered: str = _markdown().render(text)
    return rendered
