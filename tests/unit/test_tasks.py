"""stop_task ends tasks that swallow a cancellation instead of hanging shutdown."""

import asyncio
import contextlib

from gateway.runtime.tasks import stop_task


async def test_stops_a_task_that_swallows_the_first_cancel() -> None:
    async def stubborn() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)  # the first cancel is eaten, as redis-py can do
        while True:  # noqa: ASYNC110 - a busy task that ignores the first cancel
            await asyncio.sleep(0.05)

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(stop_task(task), 3)
    assert task.cancelled()


async def test_gives_up_after_the_grace_without_hanging() -> None:
    released = asyncio.Event()

    async def immortal() -> None:
        while not released.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await released.wait()

    task = asyncio.create_task(immortal())
    await asyncio.sleep(0)
    await asyncio.wait_for(stop_task(task, grace=0.3), 2)
    assert not task.done()
    released.set()
    await task
