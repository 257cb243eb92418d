"""save_attachment through Telegram: a document the person sent reaches the workspace; ids
from elsewhere and files over the limit are refused with a clear result."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_telegram import telegram_gateway
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.fakes.telegram import FakeBotAPI


async def test_save_attachment(tmp_path: Path, llm: ScriptedLLM) -> None:
    async with FakeBotAPI() as tg:
        tools = {"attachment_max_bytes": 2000}
        async with telegram_gateway(tmp_path, llm, tg, tools=tools) as gw:
            tg.add_file("doc-1", b"name,total\nana,3\n", path="documents/file_7.csv")
            tg.add_file("doc-big", b"x" * 5000, path="documents/file_8.bin")
            tg.add_file("someone-elses", b"secret", path="documents/file_9.txt")
            document = {"file_id": "doc-1", "file_unique_id": "d1", "file_name": "sales.csv",
                        "mime_type": "text/csv", "file_size": 17}  # fmt: skip
            llm.push(
                Reply.calls(
                    ("save_attachment", {"file_id": "doc-1"}),
                    ("save_attachment", {"file_id": "someone-elses"}),
                ),
                Reply.text("Saved it."),
            )
            tg.push_message(caption="keep this", document=document)
            await tg.wait_for(lambda: "Saved it." in tg.texts())
            saved, foreign = tool_results(llm.requests[1])
            assert saved == "saved attachments/sales.csv (text/plain, 17 bytes)"
            chat_files = gw.settings.workspace / "telegram-42"  # the chat's own workspace
            assert (chat_files / "attachments" / "sales.csv").read_bytes() == (
                b"name,total\nana,3\n"
            )
            assert "was sent in this conversation" in foreign
            big = {"file_id": "doc-big", "file_unique_id": "d2", "file_name": "big.bin",
                   "file_size": 5000}  # fmt: skip
            llm.push(Reply.calls(("save_attachment", {"file_id": "doc-big"})), Reply.text("No."))
            tg.push_message(document=big)
            await tg.wait_for(lambda: "No." in tg.texts())
            too_big = tool_results(llm.requests[3])[0]
            assert too_big.startswith("error: the attachment could not be fetched")
            assert "the limit is 2,000" in too_big
            assert not (chat_files / "attachments" / "big.bin").exists()
            # A file from an earlier message of this conversation can still be saved.
            llm.push(Reply.calls(("save_attachment", {"file_id": "doc-1", "path": "a/s.csv"})),
                     Reply.text("Again."))  # fmt: skip
            tg.push_message("save the csv again")
            await tg.wait_for(lambda: "Again." in tg.texts())
            assert tool_results(llm.requests[5])[0] == (
                "saved attachments/a/s.csv (text/plain, 17 bytes)"
            )
