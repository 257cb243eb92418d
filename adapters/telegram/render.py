"""The agent's Markdown as Telegram HTML, split so that every part fits 4096 after rendering.

Telegram's HTML dialect is small (b, i, s, code, pre, a, blockquote, tg-spoiler) and strict:
a stray `<` or a bad nesting rejects the whole message, so everything outside a tag we emit
is escaped, and every tag is opened and closed within one part.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from adapters.base import split_text

TELEGRAM_LIMIT = 4096  # characters (UTF-16 code units) per message
_MIN_BUDGET = 400  # escaping grows text at most ~5x ("&" -> "&amp;"), so this always fits

_FENCE_OPEN = re.compile(r"^\s*(```+|~~~+)\s*([\w+#.-]*)")
_FENCE_CLOSE = re.compile(r"^\s*(```+|~~~+)\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE = re.compile(r"^\s*\|.*\|\s*$")
_LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")

# Alternatives are tried left to right at each position; finditer never overlaps matches.
_INLINE = re.compile(
    r"(?P<tick>`+)(?P<code>.+?)(?P=tick)"
    r"|\[(?P<label>[^\]\n]+)\]\((?P<url>[^)\s]+)\)"
    r"|\*\*\*(?P<bolditalic>\S(?:.*?\S)?)\*\*\*"
    r"|\*\*(?P<bold>\S(?:.*?\S)?)\*\*"
    r"|(?<!\w)__(?P<bold2>\S(?:.*?\S)?)__(?!\w)"
    r"|~~(?P<strike>\S(?:.*?\S)?)~~"
    r"|\|\|(?P<spoiler>\S(?:.*?\S)?)\|\|"
    r"|(?<![\w*])\*(?P<italic>[^\s*](?:.*?[^\s*])?)\*(?![\w*])"
    r"|(?<!\w)_(?P<italic2>[^\s_](?:.*?[^\s_])?)_(?!\w)"
)


@dataclass(frozen=True)
class Part:
    """One message's worth of text: what to send, and the same part without markup."""

    text: str
    plain: str
    html: bool


def utf16_len(text: str) -> int:
    """Length as Telegram counts it (UTF-16 code units: an emoji outside the BMP is 2)."""
    return len(text.encode("utf-16-le")) // 2


def streamed_size(markdown: str) -> int:
    """The size of `markdown` as one message, measured the way `render_parts` measures a
    part; a streamed message is cut before this passes TELEGRAM_LIMIT."""
    return max(utf16_len(to_html(markdown)), utf16_len(markdown))


def render_parts(text: str, *, markdown: bool = True, limit: int = TELEGRAM_LIMIT) -> list[Part]:
    """Split `text` for Telegram and render each part; no part exceeds `limit` when sent.

    Splitting happens on the Markdown (so fences are closed and reopened by `split_text`)
    and each part is rendered on its own, so no tag spans two messages. Escaping can make a
    part longer than its Markdown, so the split budget shrinks until every part fits.
    """
    text = text if text.strip() else "…"
    budget = limit
    while True:
        chunks = split_text(text, budget)
        parts = [Part(to_html(c), c, True) if markdown else Part(c, c, False) for c in chunks]
        worst = max(max(utf16_len(p.text), utf16_len(p.plain)) for p in parts)
        if worst <= limit:
            return parts
        if budget <= _MIN_BUDGET:
            # Unreachable in practice: 400 characters render to at most ~2,000.
            raise ValueError(f"cannot fit text into parts of {limit} characters")
        budget = max(_MIN_BUDGET, int(budget * limit / worst * 0.95))


def to_html(markdown: str) -> str:
    """Render one part of Markdown as Telegram HTML."""
    lines = markdown.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE_OPEN.match(line)
        if fence is not None:
            body: list[str] = []
            i += 1
            while i < len(lines) and not _closes(lines[i], fence.group(1)):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end of the part)
            out.append(_pre("\n".join(body), fence.group(2)))
            continue
        if _TABLE.match(line):
            rows = _take(lines, i, _TABLE)
            i += len(rows)
            out.append(_pre("\n".join(r.strip() for r in rows), ""))
            continue
        if _QUOTE.match(line):
            quoted = _take(lines, i, _QUOTE)
            i += len(quoted)
            inner = "\n".join(_inline(_QUOTE.sub(r"\1", q)) for q in quoted)
            out.append(f"<blockquote>{inner}</blockquote>")
            continue
        out.append(_line(line))
        i += 1
    return "\n".join(out)


def _line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading is not None:
        return f"<b>{_inline(heading.group(1), nested=True)}</b>"
    if _RULE.match(line):
        return "──────────"
    bullet = _BULLET.match(line)
    if bullet is not None:
        return f"{bullet.group(1)}• {_inline(bullet.group(2))}"
    return _inline(line)


def _inline(text: str, *, nested: bool = False, in_link: bool = False) -> str:
    """Inline Markdown to HTML. Telegram forbids code inside other entities and links in links."""
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        out.append(_escape(text[pos : match.start()]))
        out.append(_inline_match(match, nested=nested, in_link=in_link))
        pos = match.end()
    out.append(_escape(text[pos:]))
    return "".join(out)


def _inline_match(match: re.Match[str], *, nested: bool, in_link: bool) -> str:
    groups = match.groupdict()
    if groups["code"] is not None:
        code = _escape(groups["code"])
        return code if nested or in_link else f"<code>{code}</code>"
    if groups["url"] is not None:
        url, label = groups["url"], groups["label"]
        if in_link or not url.startswith(_LINK_SCHEMES):
            return _escape(match.group(0))
        inner = _inline(label, nested=True, in_link=True)
        return f'<a href="{html.escape(url, quote=True)}">{inner}</a>'
    if groups["bolditalic"] is not None:
        inner = _inline(groups["bolditalic"], nested=True, in_link=in_link)
        return f"<b><i>{inner}</i></b>"
    for name, tag in (
        ("bold", "b"),
        ("bold2", "b"),
        ("strike", "s"),
        ("spoiler", "tg-spoiler"),
        ("italic", "i"),
        ("italic2", "i"),
    ):
        inner = groups[name]
        if inner is not None:
            return f"<{tag}>{_inline(inner, nested=True, in_link=in_link)}</{tag}>"
    return _escape(match.group(0))  # unreachable: every alternative is handled above


def _pre(code: str, language: str) -> str:
    body = _escape(code)
    if language:
        return f'<pre><code class="language-{language}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def _closes(line: str, opener: str) -> bool:
    match = _FENCE_CLOSE.match(line)
    return match is not None and match.group(1)[0] == opener[0]


def _take(lines: list[str], start: int, pattern: re.Pattern[str]) -> list[str]:
    taken: list[str] = []
    for line in lines[start:]:
        if not pattern.match(line):
            break
        taken.append(line)
    return taken


def _escape(text: str) -> str:
    return html.escape(text, quote=False)
