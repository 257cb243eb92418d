"""The agent's Markdown rendered as Slack mrkdwn, and Slack's message markup read back as text.

Slack treats `&`, `<` and `>` as control characters, so every literal one is escaped;
only the link and mention tokens generated here (or Slack's own `<@U…>` mentions the
agent repeats) keep their angle brackets.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*[\w+#.-]*\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?:\[([ xX])\]\s+)?(.*)$")
_NUMBERED = re.compile(r"^(\s*)(\d{1,9})[.)]\s+(.*)$")

_INLINE = re.compile(
    r"(?P<tick>`+)(?P<code>.+?)(?P=tick)"
    r"|!?\[(?P<label>[^\]\n]+)\]\((?P<url>[^()\s]+(?:\([^()\s]*\)[^()\s]*)*)(?:\s+\"[^\"]*\")?\)"
    r"|<(?P<auto>(?:https?|mailto):[^>\s]+)>"
    r"|(?P<slack><(?:@[UW]|#C|!)[\w^|.-]*>)"
    r"|\*\*(?P<bold>.+?)\*\*"
    r"|(?<!\w)__(?P<bold2>.+?)__(?!\w)"
    r"|~~(?P<strike>.+?)~~"
    r"|(?<![\w*])\*(?P<em>[^*\s](?:[^*]*[^*\s])?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<em2>[^_\s](?:[^_]*[^_\s])?)_(?![\w_])"
)
_LINKABLE = ("http://", "https://", "mailto:")
RULE_LINE = "──────────"


def escape(text: str) -> str:
    """Escape Slack's three control characters in literal text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """Render Markdown (bold, italics, strike, code, links, lists, headings, quotes) as mrkdwn."""
    out: list[str] = []
    code: list[str] | None = None
    fence = ""
    for line in markdown.split("\n"):
        if code is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                out.append(_code_block(code))
                code = None
            else:
                code.append(line)
            continue
        match = _FENCE.match(line)
        if match is not None:
            fence, code = match.group(1), []
            continue
        out.append(_line(line))
    if code is not None:  # an unclosed fence still shows as code
        out.append(_code_block(code))
    return "\n".join(out)


def _code_block(lines: list[str]) -> str:
    # Slack has no language hints; the fence alone marks the block.
    return "```\n" + escape("\n".join(lines)) + "\n```"


def _line(line: str) -> str:
    if _RULE.match(line):
        return RULE_LINE
    if match := _HEADING.match(line):
        title = match.group(1).replace("**", "").replace("__", "")
        return f"*{_inline(title)}*" if title else ""
    if match := _QUOTE.match(line):
        return "> " + _line(match.group(1))
    if match := _BULLET.match(line):
        indent, box, rest = match.groups()
        bullet = "•" if len(indent.expandtabs(4)) < 2 else "◦"
        mark = "" if box is None else ("☐ " if box == " " else "☑ ")
        return f"{indent}{bullet} {mark}{_inline(rest)}"
    if match := _NUMBERED.match(line):
        indent, number, rest = match.groups()
        return f"{indent}{number}. {_inline(rest)}"
    return _inline(line)


def _inline(text: str) -> str:
    parts: list[str] = []
    last = 0
    for match in _INLINE.finditer(text):
        parts.append(escape(text[last : match.start()]))
        parts.append(_token(match))
        last = match.end()
    parts.append(escape(text[last:]))
    return "".join(parts)


def _token(match: re.Match[str]) -> str:
    group = match.group
    if group("code") is not None:
        return f"`{escape(group('code'))}`"
    if group("url") is not None:
        return _link(group("url"), group("label"))
    if group("auto") is not None:
        return f"<{_url(group('auto'))}>"
    if group("slack") is not None:
        return group("slack")
    if (bold := group("bold") or group("bold2")) is not None:
        return f"*{_inline(bold)}*"
    if group("strike") is not None:
        return f"~{_inline(group('strike'))}~"
    return f"_{_inline(group('em') or group('em2'))}_"


def _link(url: str, label: str) -> str:
    label = label.replace("**", "").replace("`", "").strip()
    if not url.startswith(_LINKABLE):  # a relative link cannot be clicked in Slack
        return f"{escape(label)} ({escape(url)})"
    if label == url:
        return f"<{_url(url)}>"
    return f"<{_url(url)}|{escape(label)}>"


def _url(url: str) -> str:
    # Inside <url|label>, `|` and `>` would end the URL early; Slack decodes &amp; itself.
    return (
        url.replace("&", "&amp;")
        .replace("<", "%3C")
        .replace(">", "%3E")
        .replace("|", "%7C")
        .replace(" ", "%20")
    )


_ENTITY = re.compile(r"<([^<>\n]+)>")


def to_plain(text: str) -> str:
    """Slack's message markup as the agent should read it: entities decoded, links spelled out."""

    def entity(match: re.Match[str]) -> str:
        target, _, label = match.group(1).partition("|")
        if target.startswith(("@", "#")):
            return f"{target[0]}{label}" if label else target
        if target.startswith("!"):
            name = label or target[1:].split("^", 1)[0]
            return f"@{name}"
        if target.startswith("mailto:"):
            return label or target.removeprefix("mailto:")
        if label and label != target:
            return f"{label} ({target})"
        return target

    text = _ENTITY.sub(entity, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
