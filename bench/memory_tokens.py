"""Token cost of history compaction and session_search, per turn (prints tables; not a test).

A scripted model (tests/fakes/llm.py) drives a long conversation through the real gateway
(console adapter, embedded store). Every request body is measured as characters / 4:
messages plus tool schemas, as sent. Compaction rows compare dropping the oldest turns (what
chatgate did before summaries; a summary call that always fails gives exactly that) with
summarising compaction, including the summary calls themselves. Search rows show what one
session_search call adds to a turn.

    .venv/bin/python bench/memory_tokens.py [--turns 80] [--budget 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.sessions.compaction import SUMMARY_PROMPT  # noqa: E402
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text  # noqa: E402
from tests.harness import gateway_settings, running_gateway  # noqa: E402
from tools.memory.search import SUMMARY_PROMPT as SEARCH_SUMMARY  # noqa: E402

TALK = (
    "Let us go on with the migration plan: the orders table moves first, then invoices; "
    "keep the old replicas for a week and tell me what could break on the way. "
)
ANSWER = (
    "Moving orders first is fine. Watch the foreign keys from invoices, the nightly export "
    "job and the reporting views; run both schemas side by side for a day. "
) * 2
SUMMARY = "Summary:\n" + ("We are migrating tables one by one; decisions and open items. " * 12)


def tokens(request: dict[str, Any]) -> int:
    return (
        len(
            json.dumps(request["messages"], ensure_ascii=False)
            + json.dumps(request.get("tools") or [])
        )
        // 4
    )


def model(summaries_fail: bool) -> Any:
    def respond(request: dict[str, Any]) -> Reply:
        system = request["messages"][0]["content"]
        if system == SUMMARY_PROMPT:
            return Reply.error(500, "down") if summaries_fail else Reply.text(SUMMARY)
        if system == SEARCH_SUMMARY:
            return Reply.text("The orders table moved first; invoices follow.")
        if request["messages"][-1]["role"] == "tool":
            return Reply.text("Found it.")
        text = last_user_text(request)
        if text.startswith("search"):
            return Reply.calls(
                ("session_search", {"query": "orders invoices", "summarize": "sum" in text})
            )
        return Reply.text(ANSWER)

    return respond


async def conversation(turns: int, budget: int, summaries_fail: bool) -> dict[str, Any]:
    async with ScriptedLLM(model(summaries_fail)) as llm:
        with tempfile.TemporaryDirectory() as tmp:
            settings = gateway_settings(
                Path(tmp), llm.url, agent={"history_token_budget": budget}, llm={"max_retries": 0}
            )
            async with running_gateway(settings) as gw:
                for turn in range(turns):
                    await gw.say(f"turn {turn}: {TALK}")
                agent = [r for r in llm.requests if r["messages"][0]["content"] != SUMMARY_PROMPT]
                summary = [r for r in llm.requests if r["messages"][0]["content"] == SUMMARY_PROMPT]
                per_turn = [tokens(r) for r in agent]
                steady = per_turn[turns // 2 :]
                row = {
                    "mean": statistics.mean(steady),
                    "max": max(per_turn),
                    "calls": 0 if summaries_fail else len(summary),
                    "summary_in": statistics.mean(tokens(r) for r in summary)
                    if summary and not summaries_fail
                    else 0,
                }
                before = len(llm.requests)
                await gw.say("search for what we said about orders and invoices")
                plain = [
                    r
                    for r in llm.requests[before:]
                    if r["messages"][0]["content"] != SUMMARY_PROMPT
                ]
                before = len(llm.requests)
                await gw.say("search and sum up what we said about orders and invoices")
                summed = [
                    r
                    for r in llm.requests[before:]
                    if r["messages"][0]["content"] == SEARCH_SUMMARY
                ]
                tools = plain[0]["tools"]
                schema = next(t for t in tools if t["function"]["name"] == "session_search")
                row["search"] = (
                    len(json.dumps(schema)) // 4,
                    tokens(plain[-1]) - tokens(plain[0]),
                    tokens(summed[0]),
                )
                return row


async def main() -> None:
    logging.disable(logging.WARNING)  # the "before" rows log a failed summary every turn
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=80)
    parser.add_argument("--budget", type=int, default=4000)
    args = parser.parse_args()
    drop = await conversation(args.turns, args.budget, summaries_fail=True)
    fold = await conversation(args.turns, args.budget, summaries_fail=False)
    print(f"{args.turns} turns, history budget {args.budget:,} tokens; tokens = characters / 4\n")
    print(
        f"{'history':<24}{'prompt tok/turn':>16}{'max':>8}{'summary calls':>15}"
        f"{'tok/summary call':>18}{'amortised/turn':>16}"
    )
    for label, row in (("drop oldest (before)", drop), ("summarise (after)", fold)):
        amortised = row["calls"] * row["summary_in"] / args.turns
        print(
            f"{label:<24}{row['mean']:>16,.0f}{row['max']:>8,}{row['calls']:>15}"
            f"{row['summary_in']:>18,.0f}{amortised:>16,.0f}"
        )
    schema, added, summed = fold["search"]
    print(f"\n{'session_search':<44}{'tokens':>8}")
    print(f"{'its schema, on every turn (core set)':<44}{schema:>8,}")
    print(f"{'a call: its result added to the turn':<44}{added:>8,}")
    print(f"{'summarize=true: the extra summary call':<44}{summed:>8,}")


if __name__ == "__main__":
    asyncio.run(main())
