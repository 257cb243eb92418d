"""A clarifying question asked by a turn in one replica, answered by typing into another."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.intake.admission import Status
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import gateway_settings, running_gateway


async def test_typed_answer_reaches_the_turn_in_another_replica(
    tmp_path: Path, redis_url: str
) -> None:
    async with ScriptedLLM() as llm:
        one = gateway_settings(
            tmp_path / "a",
            llm.url,
            redis_url=redis_url,
            key_prefix="shared-clarify",
            tools={"clarify_timeout": 10},
            scheduler={"enabled": False},
            # Replicas verify each other's sealed answers: they share the key.
            approvals={"secret": "replicas-share-this-secret-0123"},
        )
        two = one.model_copy(update={"data_dir": tmp_path / "b"})
        async with running_gateway(one) as a, running_gateway(two) as b:
            llm.push(Reply.call("clarify", question="Which colour?", choices=["red", "blue"]))
            first = await a.submit("paint the shed")
            async with asyncio.timeout(5):
                while not any("Which colour?" in t for t in a.texts):
                    a.console.received.clear()
                    await a.console.received.wait()
            # Ordinary traffic in another session of replica B is not intercepted.
            other = await b.submit("hello", chat_id="elsewhere")
            assert other.status is Status.STARTED
            assert (await other.done).reply == "echo: hello"
            llm.push(Reply.text("Painting it red."))
            # The asker's typed answer lands on replica B, which holds no turn for it.
            answer = await b.submit("red")
            assert answer.status is Status.ANSWERED
            outcome = await asyncio.wait_for(first.done, 5)
            assert outcome.reply == "Painting it red."
            assert "alice answered: red" in tool_results(llm.requests[-1])
