"""What the person wrote in a mail, as plain text: HTML read as text, quoted history and the
signature cut off, a forwarded message kept apart so nothing in it can act as a command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

# Lines that start what a mail client quotes below (or above) a reply.
_QUOTE_HEADERS = (
    re.compile(r"^On .{0,200}wrote:\s*$", re.IGNORECASE),
    re.compile(r"^Am .{0,200}schrieb .{0,100}:\s*$", re.IGNORECASE),
    re.compile(r"^Le .{0,200}a écrit\s*:\s*$", re.IGNORECASE),
    re.compile(r"^-{2,}\s*Original Message\s*-{2,}\s*$", re.IGNORECASE),
    re.compile(r"^_{20,}\s*$"),  # Outlook's rule above the quoted mail
)
# "On Mon, 1 Jan 2026 at 10:00, Alice <alice@example.com>" + newline + "wrote:" (wrapped).
_WRAPPED_ON = re.compile(r"^On .{0,200}[^:]$", re.IGNORECASE)
_OUTLOOK_FROM = re.compile(r"^From:\s.+$", re.IGNORECASE)
_OUTLOOK_NEXT = re.compile(r"^(Sent|Date|To|Subject):\s", re.IGNORECASE)
_FORWARDED = (
    re.compile(r"^-{2,}\s*Forwarded message\s*-{2,}\s*$", re.IGNORECASE),
    re.compile(r"^Begin forwarded message:\s*$", re.IGNORECASE),
)
_SIGNATURE = re.compile(r"^--\s?$")  # RFC 3676's "-- " (and the common "--")
_MOBILE_FOOTER = re.compile(r"^Sent from my \w+", re.IGNORECASE)
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class MailText:
    own: str  # what the person wrote in this mail: commands are read from here only
    forwarded: str = ""  # a message they forwarded, for the model to read

    def for_model(self) -> str:
        if not self.forwarded:
            return self.own
        return f"{self.own}\n\n[forwarded message]\n{self.forwarded}".strip()


def split_mail_text(body: str) -> MailText:
    lines = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    forwarded: list[str] = []
    for index, line in enumerate(lines):
        if any(pattern.match(line.strip()) for pattern in _FORWARDED):
            forwarded = lines[index + 1 :]
            lines = lines[:index]
            break
    own = _without_signature(_without_quotes(lines))
    rest = _without_signature(_without_quotes(forwarded)) if forwarded else []
    return MailText(own=_tidy(own), forwarded=_tidy(forwarded and rest))


def _without_quotes(lines: list[str]) -> list[str]:
    kept: list[str] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if any(pattern.match(stripped) for pattern in _QUOTE_HEADERS):
            break
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if _WRAPPED_ON.match(stripped) and re.match(r"^.{0,100}wrote:\s*$", following):
            break
        if _OUTLOOK_FROM.match(stripped) and _OUTLOOK_NEXT.match(following):
            break
        if stripped.startswith(">"):
            continue  # quoted inline (bottom posting keeps the person's lines between)
        kept.append(line)
    return kept


def _without_signature(lines: list[str]) -> list[str]:
    for index, line in enumerate(lines):
        if _SIGNATURE.match(line) or _MOBILE_FOOTER.match(line.strip()):
            return lines[:index]
    return lines


def _tidy(lines: list[str]) -> str:
    text = "\n".join(line.rstrip() for line in lines)
    return _BLANK_RUNS.sub("\n\n", text).strip()


def html_to_text(html: str) -> str:
    """Readable text of an HTML mail: blocks on their own lines, links with their address,
    quoted blocks (<blockquote>) and scripts and styles left out."""
    reader = _HtmlReader()
    reader.feed(html)
    reader.close()
    return _tidy("".join(reader.parts).split("\n"))


# Paragraph-like blocks stand apart (a blank line); these only start a new line.
_BLOCKS = {"p", "div", "ul", "ol", "table", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "hr"}
_LINES = {"br", "tr"}
_SKIPPED = {"script", "style", "head", "title", "blockquote"}


class _HtmlReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skipping += 1
        elif tag in _BLOCKS:
            self.parts.append("\n\n")
        elif tag in _LINES:
            self.parts.append("\n")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag == "a":
            self._href = dict(attrs).get("href")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skipping = max(self._skipping - 1, 0)
        elif tag in _BLOCKS:
            self.parts.append("\n\n")
        elif tag == "a" and self._href:
            if self._href.startswith(("http://", "https://", "mailto:")):
                self.parts.append(f" ({self._href})")
            self._href = None

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(re.sub(r"\s+", " ", data))
