"""Issue 30 finding 8 end to end: after a page entered the turn, `sort --compress-prog=sh`
(an abbreviation of --compress-program, which runs a program) waits for a person like any
command that is not read-only, while a plain `sort` still runs unasked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.test_untrusted import Pages, deny_next, pages, prompts, settings_for
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import running_gateway

__all__ = ["pages"]  # the fixture, used by name

# Abbreviated long options that write or run, as GNU getopt_long reads them.
ABBREVIATED = [
    "sort --compress-prog=sh data.txt",
    "sort --out=sorted.txt data.txt",
    "file --comp",
    "date --se=2020-01-01",
]


async def test_abbreviated_writing_options_ask_after_outside_content(
    tmp_path: Path, llm: ScriptedLLM, pages: Pages, make_sandbox: Any
) -> None:
    make_sandbox()  # the shell runs in the sandbox; skipped where bwrap cannot run
    base = f"http://127.0.0.1:{pages.port}"
    async with running_gateway(settings_for(tmp_path, llm)) as gw:
        workspace = gw.app.settings.workspace / "console-chat1"
        workspace.mkdir(parents=True, exist_ok=True)
        (workspace / "data.txt").write_text("b\na\n")
        llm.push(
            Reply.call("web_fetch", url=f"{base}/page"),
            Reply.call("shell", command="sort data.txt"),
            *(Reply.call("shell", command=command) for command in ABBREVIATED),
            Reply.text("Sorted."),
        )
        turn = await gw.submit(f"sort my data as {base}/page says")
        for i, command in enumerate(ABBREVIATED):
            prompt = await deny_next(gw, i)
            assert command in prompt.text and "after outside content" in prompt.text
        assert (await turn.done).reply == "Sorted."
        results = [tool_results(r)[-1] for r in llm.requests[2 : 3 + len(ABBREVIATED)]]
        assert results[0].startswith("a\nb") and "[exit code 0]" in results[0]  # read-only
        assert results[1:] == ["error: not run: denied by alice"] * len(ABBREVIATED)
        assert not (workspace / "sorted.txt").exists() and len(prompts(gw)) == len(ABBREVIATED)
