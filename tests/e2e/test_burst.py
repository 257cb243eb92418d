"""A crowd at once (issue 20): 10,000 sessions each send one message to one process with a
small Redis connection pool; every message is stored, answered once, and none refused."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.intake.admission import Status
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.harness import eventually, gateway_settings, running_gateway

pytestmark = pytest.mark.e2e

SESSIONS = 10_000


def instant_answer(request: dict[str, Any]) -> Reply:
    """An OpenAI-compatible server's answer: "re: " and the last message."""
    return Reply(content=f"re: {last_user_text(request)}")


def instant_llm() -> ScriptedLLM:
    """A model that answers at once, on 127.0.0.1 in this process."""
    return ScriptedLLM(instant_answer, record=False)


@pytest.fixture
async def stack() -> AsyncIterator[contextlib.AsyncExitStack]:
    """Where a test's model server is closed after its gateways."""
    async with contextlib.AsyncExitStack() as stack:
        yield stack


async def test_ten_thousand_sessions_at_once_are_all_answered(
    tmp_path: Path, stack: contextlib.AsyncExitStack, redis_url: str
) -> None:
    llm = await stack.enter_async_context(instant_llm())
    settings = gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        redis={"max_connections": 4},
        llm={"stream": False},
        router={"max_concurrent_turns": 64},
        scheduler={"enabled": False},
    )
    started = time.monotonic()
    async with running_gateway(settings) as gw:
        submissions = await asyncio.gather(
            *(gw.submit(f"hello {n}", chat_id=f"c{n}") for n in range(SESSIONS))
        )
        statuses = {s.status for s in submissions}
        assert statuses <= {Status.STARTED, Status.QUEUED}, statuses
        outcomes = await asyncio.wait_for(asyncio.gather(*(s.done for s in submissions)), 300)
        drained = time.monotonic() - started
        assert all(o.ok for o in outcomes)
        replies = sorted(gw.texts)
        assert len(replies) == SESSIONS and len(set(replies)) == SESSIONS
        assert await gw.app.store.pending(str(submissions[0].session)) == []
    print(f"\n{SESSIONS} sessions drained in {drained:.1f} s")


async def test_turns_that_end_with_nothing_waiting_do_not_each_ask_the_store(
    tmp_path: Path,
    stack: contextlib.AsyncExitStack,
) -> None:
    """The claimer asks the store for waiting sessions when a slot frees only if a message may
    wait with no lease (stored while every slot was busy): one after another, 30 turns cost
    no claims beyond the start-up one and the 1 s poll, and a message that waited for a slot
    still starts as soon as one frees."""
    llm = await stack.enter_async_context(instant_llm())
    settings = gateway_settings(
        tmp_path,
        llm.url,
        llm={"stream": False},
        router={"max_concurrent_turns": 1},
        scheduler={"enabled": False},
    )
    async with running_gateway(settings) as gw:
        store = gw.app.store
        claims: list[float] = []
        claim = store.claim

        async def counted(*args: Any, **kwargs: Any) -> Any:
            claims.append(time.monotonic())
            return await claim(*args, **kwargs)

        store.claim = counted  # type: ignore[method-assign]
        started = time.monotonic()
        for n in range(30):
            assert (await gw.say(f"one at a time {n}", chat_id="solo")).ok
        elapsed = time.monotonic() - started
        assert len(claims) <= elapsed / 1.0 + 2, (len(claims), elapsed)

        # Two sessions at once with one slot: the second is stored with no lease and is
        # claimed when the first turn ends, well before the poll would find it.
        first, second = await asyncio.gather(
            gw.submit("first", chat_id="a"), gw.submit("second", chat_id="b")
        )
        assert {first.status, second.status} == {Status.STARTED, Status.QUEUED}
        begun = time.monotonic()
        outcomes = await asyncio.wait_for(asyncio.gather(first.done, second.done), 5)
        assert all(o.ok for o in outcomes)
        assert time.monotonic() - begun < 0.5


async def test_a_crowd_is_taken_in_a_bounded_number_at_a_time(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    """`router.max_concurrent_intake` messages are checked and stored at once; the rest of a
    crowd waits for room before that, and every message is still stored and answered."""
    llm = await stack.enter_async_context(instant_llm())
    settings = gateway_settings(
        tmp_path,
        llm.url,
        llm={"stream": False},
        router={"max_concurrent_intake": 3},
        scheduler={"enabled": False},
    )
    async with running_gateway(settings) as gw:
        store = gw.app.store
        intake = store.intake
        in_flight, most = 0, 0

        async def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            try:
                await asyncio.sleep(0.01)  # a slow store: without the bound all 40 overlap
                return await intake(*args, **kwargs)
            finally:
                in_flight -= 1

        store.intake = counted  # type: ignore[method-assign]
        submissions = await asyncio.gather(
            *(gw.submit(f"crowd {n}", chat_id=f"crowd{n}") for n in range(40))
        )
        assert {s.status for s in submissions} <= {Status.STARTED, Status.QUEUED}
        outcomes = await asyncio.wait_for(asyncio.gather(*(s.done for s in submissions)), 30)
        assert all(o.ok for o in outcomes)
        assert most == 3


async def test_a_crowd_sent_to_one_process_is_shared_with_another(
    tmp_path: Path, stack: contextlib.AsyncExitStack, redis_url: str
) -> None:
    """Waiting messages belong to the store, not to the process that took them: a second
    gateway on the same Redis, sent nothing (as a replica that is not Telegram's poller),
    claims and answers a fair part of a crowd sent to the first, and every message is
    answered once. Once a claim comes back full it claims again as its slots free, not a
    batch per poll (before: 32 of 800)."""

    async def slow_answer(request: dict[str, Any]) -> Reply:
        await asyncio.sleep(0.03)  # a model that takes a while, so the crowd waits
        return instant_answer(request)

    model = await stack.enter_async_context(ScriptedLLM(slow_answer, record=False))

    prefix = f"crowd{uuid.uuid4().hex[:8]}"  # both processes' keys, and no earlier run's

    def settings(name: str) -> Any:
        return gateway_settings(
            tmp_path / name,
            model.url,
            redis_url=redis_url,
            key_prefix=prefix,
            llm={"stream": False},
            router={"max_concurrent_turns": 8},
            scheduler={"enabled": False},
            approvals={"secret": "a-secret-both-processes-share"},
        )

    async with (
        running_gateway(settings("first")) as first,
        running_gateway(settings("second")) as second,
    ):
        await asyncio.sleep(0.3)  # the second is idle: its start-up claim found nothing
        crowd = 800
        submissions = await asyncio.gather(
            *(first.submit(f"crowd {n}", chat_id=f"crowd{n}") for n in range(crowd))
        )
        assert {s.status for s in submissions} <= {Status.STARTED, Status.QUEUED}
        await eventually(lambda: len(first.texts) + len(second.texts) >= crowd, within=60)
        replies = first.texts + second.texts
        assert sorted(replies) == sorted(f"re: crowd {n}" for n in range(crowd))
        # 800 turns of 30 ms at 8 at a time keep the first busy for 3 s or more; the second
        # claims within its 1 s poll and runs its share from then on.
        assert len(second.texts) >= crowd // 5, (len(first.texts), len(second.texts))
        for _ in range(250):  # the last turns' replies are sent just before they are done
            if (await first.app.store.inbox_stats())[0] == 0:
                break
            await asyncio.sleep(0.02)
        assert await first.app.store.inbox_stats() == (0, 0.0)
