"""File tools that meet a broken path answer with a tool error the model can act on; the turn
goes on (issue 30, finding 13: `ln -sf loop loop; read_file loop` raised out of the tool and
the turn was re-run again and again)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import gateway_settings, running_gateway

pytestmark = pytest.mark.e2e

LOOP = "goes through too many symbolic links"


async def test_symlink_loops_are_tool_errors_not_crashes(tmp_path: Path, llm: ScriptedLLM) -> None:
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        workspace = gw.app.settings.workspace / "console-chat1"
        workspace.mkdir(parents=True, exist_ok=True)
        os.symlink("loop", workspace / "loop")
        os.symlink("b", workspace / "a")
        os.symlink("a", workspace / "b")
        (workspace / "notes.md").write_text("kept")
        llm.push(
            Reply.calls(
                ("read_file", {"path": "loop"}),
                ("read_file", {"path": "a/inside.txt"}),
                ("search", {"pattern": "kept", "path": "loop"}),
                ("glob", {"pattern": "*", "path": "a"}),
                ("write_file", {"path": "loop", "content": "x"}),
                ("edit_file", {"path": "b", "old_text": "x", "new_text": "y"}),
                ("search", {"pattern": "kept"}),
            ),
            Reply.text("ok"),
        )
        outcome = await gw.say("read the loop")
        assert outcome.reply == "ok"
        results = tool_results(llm.requests[1])
        assert len(results) == 7
        for result in results[:6]:
            assert result.startswith("error: "), result
        assert LOOP in results[0] and LOOP in results[1]
        assert results[6] == "notes.md:1: kept"  # the walk steps over the links
        assert len(llm.requests) == 2  # one turn, run once
        assert not any("went wrong" in text for text in gw.texts)
