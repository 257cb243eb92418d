"""The global cap on turns running in one process (gateway/sessions/slots.py) on its own."""

from __future__ import annotations

import asyncio

from gateway.sessions.slots import Slots


async def test_take_now_never_waits_and_give_frees() -> None:
    slots = Slots(2)
    assert slots.take_now() and slots.take_now()
    assert not slots.take_now() and slots.free == 0
    slots.give()
    assert slots.free == 1 and slots.take_now()


async def test_waiters_are_served_in_order_before_anyone_new() -> None:
    slots = Slots(1)
    assert slots.take_now()
    order: list[str] = []

    async def wait(name: str) -> None:
        await slots.take()
        order.append(name)

    first = asyncio.create_task(wait("first"))
    second = asyncio.create_task(wait("second"))
    await asyncio.sleep(0)
    assert not slots.take_now()  # someone waits: a newcomer does not jump the queue
    assert slots.take_up_to(5) == 0
    slots.give()
    await first
    assert order == ["first"] and not second.done()
    slots.give()
    await second
    assert order == ["first", "second"] and slots.free == 0


async def test_a_waiter_cancelled_after_being_handed_a_slot_passes_it_on() -> None:
    slots = Slots(1)
    assert slots.take_now()
    cancelled = asyncio.create_task(slots.take())
    served = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    slots.give()  # handed to `cancelled`...
    cancelled.cancel()  # ...which is cancelled before it runs again
    await asyncio.gather(cancelled, return_exceptions=True)
    await asyncio.wait_for(served, 1)  # the slot went on, not lost
    assert slots.free == 0


async def test_take_up_to_takes_what_is_free() -> None:
    slots = Slots(3)
    assert slots.take_up_to(5) == 3 and slots.free == 0
    slots.give(2)
    assert slots.take_up_to(1) == 1 and slots.free == 1
