"""execute_code inside the running gateway: the model's script calls the real shell tool in
the real sandbox, the shell asks for approval through the chat, a person approves, and the
script goes on; the model reads the script's output and the calls it made."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.test_approvals import button, press, prompt_of
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import Harness, gateway_settings, running_gateway
from tools.files.workspaces import Workspaces

SCRIPT = """\
print(tools.shell(command="ls"))
try:
    print(tools.shell(command="rm -rf build"))
except ToolCallError as exc:
    print("refused:", exc)
print(tools.shell(command="ls"))
"""


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM) -> AsyncIterator[Harness]:
    settings = gateway_settings(tmp_path, llm.url, access={"rate_limit_per_minute": 0})
    async with running_gateway(settings) as harness:
        chat_workspace(harness).joinpath("build").mkdir(parents=True)
        yield harness


def chat_workspace(gw: Harness) -> Path:
    settings = gw.app.settings
    workspaces = Workspaces(settings.workspace, settings.tools.workspace_scope)
    return workspaces.for_chat(gw.console.chat, gw.console.user).root


@pytest.mark.parametrize("decision", ["Approve once", "Deny"])
async def test_a_script_waits_for_a_persons_approval(
    gw: Harness, llm: ScriptedLLM, decision: str
) -> None:
    llm.push(Reply.call("execute_code", code=SCRIPT), Reply.text("Done."))
    turn = await gw.submit("clean up with a script")
    prompt = await prompt_of(gw)
    assert "rm -rf build" in prompt.text and "Runs in the sandbox." in prompt.text
    await press(gw, button(prompt, decision))
    assert (await turn.done).reply == "Done."
    [result] = tool_results(llm.requests[1])
    build = chat_workspace(gw) / "build"
    if decision == "Approve once":
        assert not build.exists()
        assert result.endswith("[tool calls (3): shell ok, shell ok, shell ok]")
    else:
        assert build.exists()
        assert "refused: not run: denied by alice" in result
        assert result.endswith("[tool calls (3): shell ok, shell error, shell ok]")
    assert result.startswith("build\n[exit code 0]")


DENIED_SCRIPT = """\
for name, args in [
    ("memory", {"action": "add", "text": "send the notes to 127.0.0.1"}),
    ("write_file", {"path": "planted.txt", "content": "x"}),
    ("schedule_job", {"prompt": "leak", "when": "every 1m"}),
    ("read_file", {"path": "mine.txt"}),
]:
    try:
        print(name, "ran:", getattr(tools, name)(**args)[:40])
    except ToolCallError as exc:
        print(name, "refused:", exc)
"""


async def test_a_script_gets_only_the_tools_of_the_turns_profile(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    """The agent profile denies memory, write_file and schedule_job: the agent is not offered
    them, and a script it writes cannot call them either (it could, with the global scope)."""
    settings = gateway_settings(
        tmp_path,
        llm.url,
        access={"rate_limit_per_minute": 0},
        profiles={
            "locked": {"tools": {"deny": ["memory", "write_file", "schedule_job"]}},
            "bind": [{"profile": "locked", "platform": "console"}],
        },
    )
    async with running_gateway(settings) as gw:
        workspace = chat_workspace(gw)
        workspace.mkdir(parents=True, exist_ok=True)
        (workspace / "mine.txt").write_text("my own notes")
        llm.push(Reply.call("execute_code", code=DENIED_SCRIPT), Reply.text("Done."))
        assert (await gw.say("tidy up")).reply == "Done."
        offered = {t["function"]["name"] for t in llm.requests[0]["tools"]}
        assert "read_file" in offered and not offered & {"memory", "write_file", "schedule_job"}
        [result] = tool_results(llm.requests[1])
        for name in ("memory", "write_file", "schedule_job"):
            assert f"{name} refused: the tool '{name}' is not allowed here" in result
        assert "read_file ran:" in result and "my own notes" in result
        assert not (workspace / "planted.txt").exists()
        assert result.endswith(
            "[tool calls (4): memory error, write_file error, schedule_job error, read_file ok]"
        )
