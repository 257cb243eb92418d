"""The text of documents people send: each format, the caps, scans and damaged files."""

from __future__ import annotations

import io
import zipfile

import pytest

from gateway.media import documents
from gateway.media.documents import (
    DocumentError,
    document_kind,
    extract,
    may_be_document,
)
from tests import document_samples as samples

CAPS = {"max_chars": 10_000, "max_page_chars": 2_000}


def test_pdf_text_per_page() -> None:
    data = samples.pdf("Quarterly revenue rose 12 percent", "Costs (net) fell")
    assert document_kind("report.pdf", "application/pdf", data) == "pdf"
    doc = extract(data, "pdf", **CAPS)
    assert doc.pages == 2 and not doc.cut and not doc.no_text_layer
    assert "Quarterly revenue rose 12 percent" in doc.text and "Costs (net) fell" in doc.text
    assert doc.summary("report.pdf") == "Text of the PDF report.pdf, 2 pages:"


def test_a_pdf_without_a_text_layer_says_so() -> None:
    doc = extract(samples.pdf("", ""), "pdf", **CAPS)
    assert doc.no_text_layer and doc.text == ""
    assert "has no text layer" in doc.summary("scan.pdf")


def test_docx_paragraphs_and_tables() -> None:
    data = samples.docx(
        "Meeting notes", "Budget approved.", table=[["Item", "Cost"], ["Desk", "300"]]
    )
    assert document_kind("notes.docx", None, data) == "docx"
    doc = extract(data, "docx", **CAPS)
    assert doc.text.splitlines() == [
        "Meeting notes",
        "Budget approved.",
        "Item | Cost",
        "Desk | 300",
    ]


def test_xlsx_sheets_rows_and_values() -> None:
    data = samples.xlsx(
        {"Sales": [["Region", "Total"], ["North", 1200], ["South", 950.5]], "Empty": []}
    )
    assert document_kind("book.xlsx", None, data) == "xlsx"
    doc = extract(data, "xlsx", **CAPS)
    assert doc.pages == 2
    assert "Sheet: Sales\nRegion | Total\nNorth | 1200\nSouth | 950.5" in doc.text
    assert "Sheet: Empty" in doc.text
    assert doc.summary("book.xlsx").startswith("Text of the Excel workbook book.xlsx, 2 sheets")


def test_pptx_slides() -> None:
    data = samples.pptx(("Roadmap", "Ship the beta in May"), ("Risks", "Hiring"))
    assert document_kind("deck.pptx", None, data) == "pptx"
    doc = extract(data, "pptx", **CAPS)
    assert doc.pages == 2
    assert "Slide 1\nRoadmap\nShip the beta in May" in doc.text
    assert "Slide 2\nRisks\nHiring" in doc.text


def test_odt_headings_and_paragraphs_in_order() -> None:
    data = samples.odt("First point.", "Second point.", heading="Agenda")
    assert document_kind("agenda.odt", None, data) == "odt"
    assert extract(data, "odt", **CAPS).text == "Agenda\nFirst point.\nSecond point."


def test_csv_rows_with_the_sniffed_delimiter() -> None:
    data = b"name;city\nAna;Lisbon\nBo;Oslo\n"
    assert document_kind("people.csv", "text/csv", data) == "csv"
    assert extract(data, "csv", **CAPS).text == "name | city\nAna | Lisbon\nBo | Oslo"


def test_html_visible_text_only() -> None:
    page = (
        b"<html><head><title>t</title><style>p{color:red}</style></head><body>"
        b"<h1>Offer</h1><p>Price: 5&nbsp;EUR</p><script>alert(1)</script>"
        b"<table><tr><td>a</td><td>b</td></tr></table></body></html>"
    )
    assert document_kind("offer.html", None, page) == "html"
    assert extract(page, "html", **CAPS).text == "Offer\nPrice: 5 EUR\na | b"


def test_caps_per_page_and_per_file() -> None:
    data = samples.pdf("A" * 500, "B" * 500, "C" * 500)
    doc = extract(data, "pdf", max_chars=700, max_page_chars=300)
    assert doc.cut and doc.pages == 3
    assert doc.text.count("A") == 300 and doc.text.count("B") == 300
    assert doc.text.count("C") == 700 - 2 * len("A" * 300 + " […]")  # what was left
    assert "cut to fit" in doc.summary("big.pdf")


def test_other_files_are_not_documents() -> None:
    assert document_kind("photo.jpg", "image/jpeg", b"\xff\xd8\xff\xe0") is None
    assert document_kind("data.bin", None, b"PK\x03\x04 not a zip") is None
    assert document_kind("x.csv", "text/csv", b"\x00\x01\x02") is None  # binary, whatever its name
    assert may_be_document("a.PDF", None) and may_be_document(None, "text/csv")
    assert not may_be_document("clip.mp4", "video/mp4")


def test_a_damaged_document_is_one_clear_error() -> None:
    data = samples.pdf("fine")[:200]
    with pytest.raises(DocumentError, match="could not be read as a PDF"):
        extract(data, "pdf", **CAPS)


def test_a_zip_that_unpacks_too_far_is_refused_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "MAX_UNPACKED_BYTES", 10_000)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\x00" * 10_001)
    data = buffer.getvalue()
    assert document_kind("bomb.docx", None, data) == "docx"
    with pytest.raises(DocumentError, match="unpacks to"):
        extract(data, "docx", **CAPS)
