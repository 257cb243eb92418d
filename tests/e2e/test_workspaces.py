"""A workspace per chat through the real gateway: what one chat's tools write, another chat's
tools cannot read, list or search (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.sdk.messages import ButtonPress, UserRef
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import gateway_settings, running_gateway

pytestmark = pytest.mark.e2e


async def test_two_chats_cannot_see_each_others_files(tmp_path: Path) -> None:
    async with ScriptedLLM() as llm:
        settings = gateway_settings(tmp_path, llm.url)
        async with running_gateway(settings) as gw:
            llm.push(
                Reply.call("write_file", path="secret.txt", content="pin 1234"), Reply.text("ok")
            )
            assert (await gw.say("note my pin")).reply == "ok"

            llm.push(
                Reply.calls(
                    ("read_file", {"path": "secret.txt"}),
                    ("glob", {"pattern": "*"}),
                    ("search", {"pattern": "1234"}),
                    ("read_file", {"path": "../console-chat1/secret.txt"}),
                ),
                Reply.text("nothing here"),
            )
            assert (await gw.say("what is the pin?", chat_id="chat2")).reply == "nothing here"
            missing, listing, found, escape = tool_results(llm.requests[3])
            assert missing.startswith("error: 'secret.txt' does not exist")
            assert listing.startswith("no files match")
            assert found.startswith("no matches")
            assert "outside the workspace" in escape

            llm.push(Reply.call("read_file", path="secret.txt"), Reply.text("1234"))
            assert (await gw.say("what is my pin?")).reply == "1234"
            assert "pin 1234" in tool_results(llm.requests[5])[0]
    root = settings.workspace
    assert sorted(p.name for p in root.iterdir()) == ["console-chat1", "console-chat2"]
    assert (root / "console-chat1" / "secret.txt").read_text() == "pin 1234"


async def test_forget_offers_to_delete_the_chats_files_and_only_its_sender_decides(
    tmp_path: Path,
) -> None:
    async with ScriptedLLM() as llm:
        settings = gateway_settings(tmp_path, llm.url)
        async with running_gateway(settings) as gw:
            llm.push(
                Reply.call("write_file", path="draft.md", content="x" * 2048), Reply.text("ok")
            )
            await gw.say("write a draft")
            other = gw.console.inbound("hi", chat_id="chat2")
            await gw.app.admission.submit(other)  # another chat keeps its files
            folder = settings.workspace / "console-chat1"
            assert (folder / "draft.md").exists()

            reply = await gw.say("/forget")
            assert reply.reply is not None and reply.reply.startswith("Forgot this chat")
            offer = gw.console.sent[-1]
            assert offer.text.startswith("This chat's workspace still holds 1 file(s), 2 KB.")
            delete, keep = offer.buttons[0]
            assert (delete.label, keep.label) == ("Delete files", "Keep them")

            def press(data: str, user: str) -> ButtonPress:
                return ButtonPress(
                    event_id=f"p-{user}-{data}",
                    chat=gw.console.chat,
                    user=UserRef(platform="console", user_id=user, display_name=user),
                    data=data,
                )

            # Data that is no choice is refused before the offer is read, and the offer stays.
            token = delete.data.split(":")[1]
            forged = await gw.app.extensions.press(press(f"wipe:{token}:maybe", "alice"))
            assert forged.alert and forged.toast == "This button is not valid."
            refused = await gw.app.extensions.press(press(delete.data, "mallory"))
            assert refused.alert and "Only the person" in refused.toast
            assert (folder / "draft.md").exists()
            done = await gw.app.extensions.press(press(delete.data, "alice"))
            assert done.edit_text == "Deleted 1 file(s), 2 KB from this chat's workspace."
            assert not folder.exists()
            again = await gw.app.extensions.press(press(keep.data, "alice"))
            assert again.alert and "expired" in again.toast
