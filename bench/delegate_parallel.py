"""Parallel delegation: wall time of a batch of sub-agents vs. the same tasks one by one
(prints a table; not a test). Each sub-agent's model call is delayed by the scripted LLM
(tests/fakes/llm.py) as a slow local model would be; the gateway runs in-process.

    .venv/bin/python bench/delegate_parallel.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.llm import Reply, ScriptedLLM, last_user_text  # noqa: E402
from tests.harness import gateway_settings, running_gateway  # noqa: E402
from tools.agent.delegate import SUBAGENT_PROMPT  # noqa: E402

DELAYS = {"alpha": 0.4, "beta": 0.8, "gamma": 1.2}  # seconds per sub-agent model call


def model(batch: bool) -> Any:
    def respond(request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        if messages[0]["content"] == SUBAGENT_PROMPT:
            task = last_user_text(request)
            return Reply.text(f"{task} done", delay=DELAYS[task])
        done = sum(1 for m in messages if m["role"] == "tool")
        if batch:
            if done:
                return Reply.text("all done")
            return Reply.calls(("delegate", {"tasks": list(DELAYS)}))
        if done < len(DELAYS):
            return Reply.calls(("delegate", {"task": list(DELAYS)[done]}))
        return Reply.text("all done")

    return respond


async def wall(batch: bool) -> float:
    async with ScriptedLLM(model(batch)) as llm:
        with tempfile.TemporaryDirectory() as tmp:
            async with running_gateway(gateway_settings(Path(tmp), llm.url)) as gw:
                started = time.perf_counter()
                outcome = await gw.say("do the three tasks")
                assert outcome.reply == "all done", outcome
                return time.perf_counter() - started


async def main() -> None:
    rounds = 3
    batch = min([await wall(True) for _ in range(rounds)])
    serial = min([await wall(False) for _ in range(rounds)])
    print(f"sub-agent model delays: {', '.join(f'{d:g} s' for d in DELAYS.values())}")
    print(f"slowest {max(DELAYS.values()):g} s, sum {sum(DELAYS.values()):g} s; best of {rounds}\n")
    print(f"{'how':<36}{'wall s':>8}")
    print(f"{'one delegate call, tasks=[3]':<36}{batch:>8.2f}")
    print(f"{'three delegate calls, one by one':<36}{serial:>8.2f}")


if __name__ == "__main__":
    asyncio.run(main())
