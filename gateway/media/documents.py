"""Text from the documents people send: PDF, Word (DOCX), Excel (XLSX), PowerPoint (PPTX),
OpenDocument text (ODT), CSV and HTML, capped per file and per page (sheet, slide).

The office formats need `chatgate[documents]` (pypdf, python-docx, openpyxl, python-pptx,
odfpy), imported when a document arrives; CSV and HTML need only the standard library.
"""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

# An office file is a zip of XML; one that unpacks to more than this is refused unread
# (a "zip bomb" would otherwise fill the memory of the library that parses it).
MAX_UNPACKED_BYTES = 200_000_000
MAX_PAGES = 500  # pages, sheets or slides looked at in one file

LABELS = {
    "pdf": "PDF",
    "docx": "Word document",
    "xlsx": "Excel workbook",
    "pptx": "PowerPoint presentation",
    "odt": "OpenDocument text",
    "csv": "CSV file",
    "html": "HTML page",
}
_LIBRARIES = {
    "pdf": "pypdf",
    "docx": "docx",
    "xlsx": "openpyxl",
    "pptx": "pptx",
    "odt": "odf",
}
_EXTENSIONS = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".pptx": "pptx",
    ".odt": "odt",
    ".csv": "csv",
    ".htm": "html",
    ".html": "html",
}
_MIMES = {"text/csv": "csv", "text/html": "html", "application/pdf": "pdf"}
_ODT = b"application/vnd.oasis.opendocument.text"


class DocumentError(Exception):
    """The document cannot be read; the message says why in a few words."""


@dataclass(frozen=True)
class DocumentText:
    kind: str  # a key of LABELS
    text: str  # capped; empty when there is no text
    pages: int  # pages, sheets or slides in the file (0: the format has none)
    cut: bool  # text was left out to keep within the caps
    no_text_layer: bool = False  # a PDF whose pages are only images (a scan)

    @property
    def label(self) -> str:
        return LABELS[self.kind]

    def summary(self, name: str) -> str:
        """The line that introduces the text for the model."""
        unit = {"xlsx": "sheet", "pptx": "slide"}.get(self.kind, "page")
        pages = f", {self.pages} {unit}{'s' if self.pages != 1 else ''}" if self.pages else ""
        if self.no_text_layer:
            return (
                f"{self.label} {name}{pages}: it has no text layer (a scanned document?), "
                "so no text could be read from it."
            )
        if not self.text.strip():
            return f"{self.label} {name}{pages}: it contains no text."
        cut = " (cut to fit: only the start of long pages and of the file is shown)"
        return f"Text of the {self.label} {name}{pages}{cut if self.cut else ''}:"


def may_be_document(name: str | None, mime: str | None) -> bool:
    """Whether a file's name or declared type says it may be one of the readable formats,
    so that it is worth downloading to look (a video is not)."""
    suffix = ("." + name.rsplit(".", 1)[-1].lower()) if name and "." in name else ""
    kind = (mime or "").split(";")[0].strip().lower()
    return (
        suffix in _EXTENSIONS
        or kind in _MIMES
        or kind.startswith(("application/vnd.openxmlformats", "application/vnd.oasis"))
    )


def document_kind(name: str | None, mime: str | None, data: bytes) -> str | None:
    """Which of the readable formats `data` is (a key of LABELS), or None. The content
    decides for the binary formats; the name or type for CSV and HTML, which are plain text."""
    if data.startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        return _zipped_kind(data)
    suffix = ("." + name.rsplit(".", 1)[-1].lower()) if name and "." in name else ""
    kind = _EXTENSIONS.get(suffix) or _MIMES.get((mime or "").split(";")[0].strip().lower())
    if kind in ("csv", "html") and b"\x00" not in data[:8192]:
        return kind
    return None


def missing_library(kind: str) -> str | None:
    """The module a format needs that is not installed (install chatgate[documents])."""
    module = _LIBRARIES.get(kind)
    if module is None:
        return None
    import importlib.util

    return None if importlib.util.find_spec(module) is not None else module


def extract(data: bytes, kind: str, *, max_chars: int, max_page_chars: int) -> DocumentText:
    """The text of a document of `kind`, at most `max_chars` in all and `max_page_chars`
    per page (sheet, slide). Blocking: run it in a thread. Raises DocumentError."""
    if missing_library(kind) is not None:
        raise DocumentError(
            f"reading {LABELS[kind]}s needs chatgate[documents] (pip install 'chatgate[documents]')"
        )
    if kind in ("docx", "xlsx", "pptx", "odt"):
        _check_unpacked_size(data)
    reader = _READERS[kind]
    try:
        pages = reader(data)
        return _capped(kind, pages, max_chars, max_page_chars)
    except DocumentError:
        raise
    except Exception as exc:  # the libraries raise many types for damaged files
        raise DocumentError(f"it could not be read as a {LABELS[kind]} ({_why(exc)})") from None


# -- capping --------------------------------------------------------------------------------


@dataclass
class _Pages:
    """A reader's pages (or one page for formats without them), as lazily produced text."""

    texts: Iterable[str]
    count: int = 0  # 0: the format has no pages


def _capped(kind: str, pages: _Pages, max_chars: int, max_page_chars: int) -> DocumentText:
    parts: list[str] = []
    used = 0
    cut = False
    any_text = False
    for index, page in enumerate(pages.texts):
        if index >= MAX_PAGES or used >= max_chars:
            cut = True
            break
        text = page.strip()
        any_text = any_text or bool(text)
        if len(text) > max_page_chars:
            text, cut = text[:max_page_chars] + " […]", True
        if used + len(text) > max_chars:
            text, cut = text[: max(max_chars - used, 0)] + " […]", True
        parts.append(text)
        used += len(text)
    joined = "\n\n".join(p for p in parts if p)
    scanned = kind == "pdf" and not any_text and pages.count > 0
    return DocumentText(kind, joined, pages.count, cut, no_text_layer=scanned)


def _why(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _zipped_kind(data: bytes) -> str | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            if "word/document.xml" in names:
                return "docx"
            if "xl/workbook.xml" in names:
                return "xlsx"
            if "ppt/presentation.xml" in names:
                return "pptx"
            if "mimetype" in names and archive.read("mimetype").strip() == _ODT:
                return "odt"
    except (zipfile.BadZipFile, OSError, KeyError, RuntimeError):
        return None
    return None


def _check_unpacked_size(data: bytes) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            total = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise DocumentError(f"it is not a valid office file ({_why(exc)})") from None
    if total > MAX_UNPACKED_BYTES:
        raise DocumentError(
            f"it unpacks to {total:,} bytes, more than {MAX_UNPACKED_BYTES:,}; it was not read"
        )


# -- the readers ------------------------------------------------------------------------------


def _pdf(data: bytes) -> _Pages:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise DocumentError("the PDF is protected by a password")
    pages = reader.pages
    return _Pages((page.extract_text() or "" for page in pages), count=len(pages))


def _docx(data: bytes) -> _Pages:
    from docx import Document
    from docx.table import Table

    document = Document(io.BytesIO(data))

    def blocks() -> Iterator[str]:
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                yield "\n".join(_row(cell.text for cell in row.cells) for row in block.rows)
            elif block.text.strip():
                yield block.text

    return _Pages(["\n".join(blocks())])


def _xlsx(data: bytes) -> _Pages:
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)

    def sheets() -> Iterator[str]:
        try:
            for sheet in book.worksheets:
                lines = [f"Sheet: {sheet.title}"]
                for values in sheet.iter_rows(values_only=True):
                    line = _row("" if v is None else str(v) for v in values)
                    if line:
                        lines.append(line)
                yield "\n".join(lines)
        finally:
            book.close()

    return _Pages(sheets(), count=len(book.sheetnames))


def _pptx(data: bytes) -> _Pages:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))

    def slides() -> Iterator[str]:
        for number, slide in enumerate(deck.slides, 1):
            lines = [f"Slide {number}"]
            for shape in slide.shapes:
                lines.extend(_shape_text(shape))
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = slide.notes_slide.notes_text_frame.text.strip()
                if notes:
                    lines.append(f"Notes: {notes}")
            yield "\n".join(lines)

    return _Pages(slides(), count=len(deck.slides))


def _shape_text(shape: Any) -> Iterator[str]:
    if getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip():
        yield shape.text_frame.text
    if getattr(shape, "has_table", False):
        for row in shape.table.rows:
            yield _row(cell.text for cell in row.cells)
    for inner in getattr(shape, "shapes", ()):  # a group
        yield from _shape_text(inner)


def _odt(data: bytes) -> _Pages:
    from odf import teletype
    from odf.namespaces import TEXTNS
    from odf.opendocument import load

    document = load(io.BytesIO(data))

    def paragraphs(node: Any) -> Iterator[str]:
        for child in node.childNodes:
            if getattr(child, "qname", None) in ((TEXTNS, "p"), (TEXTNS, "h")):
                text = teletype.extractText(child)
                if text.strip():
                    yield text
            elif getattr(child, "childNodes", None):
                yield from paragraphs(child)

    return _Pages(["\n".join(paragraphs(document.text))])


def _csv(data: bytes) -> _Pages:
    text = _decode(data)
    try:
        dialect: Any = csv.Sniffer().sniff(text[:4096])
    except csv.Error:
        dialect = csv.excel
    rows = (_row(row) for row in csv.reader(io.StringIO(text), dialect))
    return _Pages(["\n".join(row for row in rows if row)])


def _html(data: bytes) -> _Pages:
    parser = _HTMLText()
    parser.feed(_decode(data))
    parser.close()
    return _Pages([parser.text()])


_READERS = {
    "pdf": _pdf,
    "docx": _docx,
    "xlsx": _xlsx,
    "pptx": _pptx,
    "odt": _odt,
    "csv": _csv,
    "html": _html,
}


def _row(cells: Iterable[str]) -> str:
    values = [" ".join(c.split()) for c in cells]
    while values and not values[-1]:
        values.pop()
    return " | ".join(values)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


class _HTMLText(HTMLParser):
    """The visible text of a page: no scripts or styles, a line break per block."""

    _HIDDEN = frozenset({"script", "style", "noscript", "template", "head"})
    _BLOCKS = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "table"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._HIDDEN:
            self._hidden += 1
        elif tag in self._BLOCKS:
            self._parts.append("\n")
        elif tag in ("td", "th"):
            self._parts.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN:
            self._hidden = max(self._hidden - 1, 0)
        elif tag in self._BLOCKS:
            self._parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self._parts.append(data)

    def text(self) -> str:
        lines = (" ".join(line.split()).strip(" |") for line in "".join(self._parts).split("\n"))
        return "\n".join(line for line in lines if line)
