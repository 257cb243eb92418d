"""Documents sent on Telegram reach the model as text: the real python-telegram-bot in the
gateway, the fake Bot API serving the files, the scripted LLM recording its requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import document_samples as samples
from tests.e2e.test_telegram import telegram_gateway
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.fakes.telegram import FakeBotAPI

pytestmark = pytest.mark.e2e

MIMES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


def document(tg: FakeBotAPI, name: str, data: bytes) -> dict[str, object]:
    file_id = name.replace(".", "-")
    tg.add_file(file_id, data, path=f"documents/{name}")
    return {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_name": name,
            "mime_type": MIMES[name.rsplit(".", 1)[1]], "file_size": len(data)}  # fmt: skip


async def test_a_pdf_a_docx_and_an_xlsx_reach_the_model_as_marked_text(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    files = {
        "report.pdf": samples.pdf("Revenue grew 12 percent in March"),
        "minutes.docx": samples.docx("The board approved the new office."),
        "sales.xlsx": samples.xlsx({"Q1": [["Region", "Total"], ["North", 4711]]}),
    }
    llm.push(Reply.text("Read the PDF."), Reply.text("Read the minutes."), Reply.text("Read it."))
    async with telegram_gateway(tmp_path, llm, tg):
        for sent, (name, data) in enumerate(files.items(), 1):
            tg.push_message("what does this say?", document=document(tg, name, data))
            await tg.wait_sent(sent, within=30)
    pdf, docx, xlsx = (last_user_text(r) for r in llm.requests[:3])
    assert '<untrusted-data source="file report.pdf">' in pdf
    assert "Text of the PDF report.pdf, 1 page:\nRevenue grew 12 percent in March" in pdf
    assert '<untrusted-data source="file minutes.docx">' in docx
    assert "The board approved the new office." in docx
    assert '<untrusted-data source="file sales.xlsx">' in xlsx
    assert "Sheet: Q1\nRegion | Total\nNorth | 4711" in xlsx
    # History keeps the note, not the text: the next request has the file's note only.
    assert "[attachment: document report.pdf" in pdf


async def test_a_scanned_pdf_says_it_has_no_text_and_read_file_reads_a_docx(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    scan = samples.pdf("", "")
    llm.push(
        Reply.text("It is a scan."),
        Reply.call("save_attachment", file_id="minutes-docx"),
        Reply.call("read_file", path="attachments/minutes.docx"),
        Reply.text("Done."),
    )
    async with telegram_gateway(tmp_path, llm, tg):
        tg.push_message("read this", document=document(tg, "scan.pdf", scan))
        await tg.wait_sent(1, within=30)
        minutes = samples.docx("Action: renew the lease.")
        tg.push_message("save it and read it", document=document(tg, "minutes.docx", minutes))
        await tg.wait_for(lambda: "Done." in tg.texts(), within=30)
    assert "scan.pdf, 2 pages: it has no text layer" in last_user_text(llm.requests[0])
    read = tool_results(llm.requests[3])[-1]
    assert "Action: renew the lease." in read and "<untrusted-data" in read
