"""The agent's Markdown in WhatsApp's own formatting: *bold*, _italic_, ~strike~, `code` and
```blocks```. Links become "text (url)"; headings become bold lines. Code is left as it is."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_PLACEHOLDER = "\x00{}\x00"


def to_whatsapp(markdown: str) -> str:
    kept: list[str] = []

    def keep(text: str) -> str:
        kept.append(text)
        return _PLACEHOLDER.format(len(kept) - 1)

    text = _FENCE.sub(lambda m: keep("```" + m.group(1).rstrip("\n") + "```"), markdown)
    text = _INLINE_CODE.sub(lambda m: keep(m.group(0)), text)
    text = _LINK.sub(
        lambda m: m.group(1) if m.group(1) == m.group(2) else f"{m.group(1)} ({m.group(2)})", text
    )
    text = _ITALIC.sub(lambda m: keep(f"_{m.group(1)}_"), text)
    text = _BOLD.sub(lambda m: keep(f"*{m.group(1) or m.group(2)}*"), text)
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    text = _HEADING.sub(lambda m: keep(f"*{m.group(1)}*"), text)
    for _ in range(3):  # a kept part may hold another (bold around code)
        text = re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], text)
    return text


def _link(match: re.Match[str]) -> str:
    label, url = match.group(1), match.group(2)
    return label if label == url else f"{label} ({url})"
