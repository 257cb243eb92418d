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
