"""Browser tools: time per step and memory per browser context, against the local test pages.

    .venv/bin/python bench/browser_steps.py [--rounds 10] [--contexts 8]

Prints two tables. Times are the tool calls as the agent makes them (snapshot included in
each result). Memory is the Chromium process tree from /proc: RSS counts shared pages in
every process, PSS splits them, so PSS is what a context really adds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.config import BrowserSettings  # noqa: E402
from gateway.sdk.tooling import ToolContext  # noqa: E402
from tests.browser_kit import Tools, chat  # noqa: E402
from tests.fakes.web_pages import (  # noqa: E402
    PAGES_HOST,
    InternalServer,
    PageSite,
    loopback_connector,
    page_resolver,
)
from tests.procs import marker_switch, memory_kb, process_tree  # noqa: E402
from tools.files.workspace import Workspace, WorkspaceFor  # noqa: E402
from tools.web.browser import BrowserManager, find_chromium  # noqa: E402
from tools.web.netguard import AddressGuard  # noqa: E402


def ctx(name: str, user_text: str = "") -> ToolContext:
    return chat(f"bench-{name}", user_text)


class Runner:
    """Times each tool call by step name; an error stops the benchmark."""

    def __init__(self, manager: BrowserManager) -> None:
        self.tools = Tools(manager)
        self.times: dict[str, list[float]] = {}

    async def __call__(self, step: str, context: ToolContext, name: str, **args: Any) -> str:
        started = time.perf_counter()
        out = await self.tools(context, name, **args)
        self.times.setdefault(step, []).append(time.perf_counter() - started)
        if out.startswith("error:"):
            raise RuntimeError(f"{step}: {out}")
        return out


def _fixed(workspace: Workspace) -> WorkspaceFor:
    """One workspace for every chat (the tests do not exercise workspace scopes)."""
    return lambda ctx: workspace


def tree_memory(marker: str) -> tuple[int, int, int]:
    """(processes, RSS MiB, PSS MiB) of the Chromium started with `marker`."""
    pids = process_tree(marker)
    rss = pss = 0
    for pid in pids:
        r, p = memory_kb(pid)
        rss, pss = rss + r, pss + p
    return len(pids), rss // 1024, pss // 1024


async def main(rounds: int, max_contexts: int) -> None:
    chromium = find_chromium(BrowserSettings())
    marker = marker_switch()
    off_machine: list[str] = []
    async with PageSite() as site, InternalServer() as internal:
        site.internal_port = internal.port
        with tempfile.TemporaryDirectory() as workspace:
            manager = BrowserManager(
                BrowserSettings(max_contexts=max_contexts + 1, extra_args=[marker]),
                chromium,
                AddressGuard([PAGES_HOST], resolver=page_resolver()),
                _fixed(Workspace(Path(workspace))),
                connect=loopback_connector(off_machine),
            )
            run = Runner(manager)
            try:
                await run(
                    "first navigate (starts Chromium)",
                    ctx("cold"),
                    "browser_navigate",
                    url=f"{site.base}/shop",
                )
                await manager.close_session(str(ctx("cold").session))
                for n in range(rounds):
                    c = ctx(f"steps{n}", user_text="pw: correct horse")
                    await run(
                        "navigate (new context)", c, "browser_navigate", url=f"{site.base}/shop"
                    )
                    await run(
                        "navigate (same context)", c, "browser_navigate", url=f"{site.base}/shop"
                    )
                    await run("snapshot", c, "browser_snapshot")
                    await run("select", c, "browser_select", ref=1, value="Large")
                    await run("click checkbox", c, "browser_click", ref=2)
                    await run("click submit (navigates)", c, "browser_click", ref=3)
                    await run("back", c, "browser_back")
                    await run("navigate JS page", c, "browser_navigate", url=f"{site.base}/js")
                    await run("click (JS fetch)", c, "browser_click", ref=1)
                    await run("navigate login", c, "browser_navigate", url=f"{site.base}/login")
                    await run("type", c, "browser_type", ref=1, text="ana")
                    await run(
                        "type password + Enter",
                        c,
                        "browser_type",
                        ref=2,
                        text="correct horse",
                        submit=True,
                    )
                    await run("screenshot", c, "browser_screenshot")
                    await manager.close_session(str(c.session))

                print(f"\nTime per step ({rounds} rounds, local pages, 2-CPU machine)\n")
                print(f"| {'step':<34} | {'median ms':>9} | {'p90 ms':>7} | {'max ms':>7} |")
                print(f"|{'-' * 36}|{'-' * 11}|{'-' * 9}|{'-' * 9}|")
                for step, values in run.times.items():
                    ordered = sorted(values)
                    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
                    print(
                        f"| {step:<34} | {statistics.median(values) * 1000:>9.0f} "
                        f"| {p90 * 1000:>7.0f} | {max(values) * 1000:>7.0f} |"
                    )

                print(f"\nMemory of the Chromium process tree (pages: {site.base}/js)\n")
                print(
                    f"| {'contexts':>8} | {'processes':>9} | {'RSS MiB':>7} | {'PSS MiB':>7} "
                    f"| {'PSS per added context':>21} |"
                )
                print(f"|{'-' * 10}|{'-' * 11}|{'-' * 9}|{'-' * 9}|{'-' * 23}|")
                previous: tuple[int, int] | None = None
                await manager.close_session(str(ctx("keeper").session))
                for n in range(1, max_contexts + 1):
                    await run("navigate", ctx(f"mem{n}"), "browser_navigate", url=f"{site.base}/js")
                    await asyncio.sleep(0.5)  # let the renderer finish its start-up work
                    procs, rss, pss = tree_memory(marker)
                    added = (
                        "" if previous is None else f"{(pss - previous[1]) / (n - previous[0]):.0f}"
                    )
                    print(f"| {n:>8} | {procs:>9} | {rss:>7} | {pss:>7} | {added:>21} |")
                    previous = (n, pss)
            finally:
                await manager.close()
    assert not off_machine, off_machine
    assert internal.hits == [], internal.hits


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--contexts", type=int, default=8)
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.contexts))
