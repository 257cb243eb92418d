"""The stored message log of the web chat and the API, and live events between replicas."""

from __future__ import annotations

import asyncio

from gateway.store.base import Store
from gateway.web.transcript import ChatMessage, LiveHub, MessageLog, new_id


async def test_messages_come_back_in_order_and_the_oldest_go(embedded_store: Store) -> None:
    log = MessageLog(embedded_store, keep=3)
    ids = [new_id() for _ in range(5)]
    for i, mid in enumerate(reversed(ids)):  # written out of order
        await log.put("web:alice/c1", ChatMessage(id=mid, role="bot", text=f"m{i}", ts=0.0))
    kept = await log.all("web:alice/c1")
    assert [m.id for m in kept] == ids[-3:]
    assert [m.id for m in await log.all("web:alice/c1")] == ids[-3:]  # dropped for good
    assert await log.get("web:alice/c1", ids[0]) is None
    assert await log.all("web:alice/other") == []


async def test_live_events_reach_subscribers_on_any_replica(redis_url: str) -> None:
    from gateway.store.redis import RedisStore

    first, second = RedisStore(redis_url, key_prefix="hub"), RedisStore(redis_url, key_prefix="hub")
    here, there = LiveHub(first, "web:events"), LiveHub(second, "web:events")
    await here.start()
    await there.start()
    try:
        with here.subscribe("user:alice") as alice, here.subscribe("user:bob") as bob:
            for _ in range(100):  # the subscription takes a moment on Redis
                await there.publish("user:alice", {"type": "typing"})
                try:
                    event = await asyncio.wait_for(alice.get(), 0.1)
                    break
                except TimeoutError:
                    continue
            assert event == {"type": "typing"}
            assert bob.empty()
    finally:
        await here.stop()
        await there.stop()
        await first.close()
        await second.close()
