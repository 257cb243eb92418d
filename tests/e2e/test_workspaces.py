"""A workspace per chat through the real gateway: what one chat's tools write, another chat's
tools cannot read, list or search (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
