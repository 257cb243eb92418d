"""Redis itself fails: two `chatgate run` replicas on a Sentinel-managed master, then on a Redis
Cluster, take 500 Telegram webhooks from 50 chats; midway the master (on the Cluster, the
master serving the most of the chats' sessions) is killed with SIGKILL. The replica is
promoted, the gateways follow it without a restart, and every message is answered exactly
once. The failover time and the answers' p99 latency are printed (pytest -s)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from gateway.store.redis import QUEUE_SHARDS
from gateway.store.redis_base import queue_shard
from tests.fakes.llm import ScriptedLLM
from tests.fakes.telegram import FakeBotAPI
from tests.fixtures_redis_ha import RedisClusterSet, SentinelSet
from tests.harness import eventually
from tests.replicas import (
    Replica,
    base_env,
    model_env,
    post_webhook,
    start_replica,
    telegram_webhook_env,
)

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

CHATS = 50
PER_CHAT = 10
LEASE_TTL = "2"


def gateway_env(tg: FakeBotAPI, llm: ScriptedLLM, **redis: str) -> dict[str, str]:
    return base_env(
        **telegram_webhook_env(tg),
        **model_env(llm),
        CHATGATE_REDIS__KEY_PREFIX=f"ha{uuid.uuid4().hex[:8]}",
        CHATGATE_ROUTER__LEASE_TTL=LEASE_TTL,
        **{f"CHATGATE_REDIS__{name.upper()}": value for name, value in redis.items()},
    )


async def deliver_patiently(replicas: list[Replica], update: dict[str, Any], start: int) -> None:
    """Telegram's way: a webhook call that fails is made again (here on the other replica
    too), for as long as Redis takes to fail over."""
    deadline = time.monotonic() + 60
    attempt = 0
    while time.monotonic() < deadline:
        replica = replicas[(start + attempt) % len(replicas)]
        if await post_webhook(replica, update) == 200:
            return
        attempt += 1
        await asyncio.sleep(min(0.05 * attempt, 0.5))
    raise AssertionError(f"no replica took update {update['update_id']}")


async def run_through_a_failover(
    tg: FakeBotAPI,
    replicas: list[Replica],
    kill_master: Callable[[], float],
) -> dict[str, float]:
    """500 messages from 50 chats, `kill_master` (returns the failover time) once half are
    delivered; every message answered exactly once. Returns the run's figures."""
    texts = {
        (chat, n): f"chat {chat} message {n}" for chat in range(CHATS) for n in range(PER_CHAT)
    }
    sent_at: dict[str, float] = {}
    answered_at: dict[str, float] = {}
    delivered = 0
    half = asyncio.Event()

    async def chat_sends(chat: int) -> None:
        nonlocal delivered
        for n in range(PER_CHAT):
            text = texts[(chat, n)]
            message = tg.message(text, chat_id=1000 + chat, user_id=1000 + chat)
            update = {"update_id": 100_000 + chat * PER_CHAT + n, "message": message}
            sent_at[text] = time.monotonic()
            await deliver_patiently(replicas, update, start=chat + n)
            delivered += 1
            if delivered >= len(texts) // 2:
                half.set()
            await asyncio.sleep(0.02)

    async def watch_answers() -> None:
        while True:
            now = time.monotonic()
            for reply in tg.texts():
                text = reply.removeprefix("echo: ")
                answered_at.setdefault(text, now)
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch_answers())
    senders = asyncio.gather(*(chat_sends(chat) for chat in range(CHATS)))
    try:
        await half.wait()
        failover = await asyncio.to_thread(kill_master)
        await senders
        with contextlib.suppress(AssertionError):  # what is missing is reported below
            await eventually(lambda: len(answered_at) >= len(texts), 90, "every answer")
        await asyncio.sleep(float(LEASE_TTL) + 2)  # time for any second answer to show
    finally:
        watcher.cancel()
        if not senders.done():
            senders.cancel()
    # Notices ("Got it. I will answer this after the current request.") come and go with
    # the timing; the answers are what must come once each.
    counts = Counter(t for t in tg.texts() if t.startswith("echo: "))
    missing = [t for t in texts.values() if counts[f"echo: {t}"] == 0]
    twice = {t: c for t, c in counts.items() if c > 1}
    logs = "\n".join(f"== {r.name}\n{r.tail(25)}" for r in replicas)
    assert not missing, f"{len(missing)} unanswered, e.g. {missing[:5]}\n{logs}"
    assert not twice, f"answered more than once: {list(twice.items())[:5]}"
    assert len(counts) == len(texts)
    refused = sum(1 for t in tg.texts() if "storage is unreachable" in t)
    latencies = sorted(answered_at[t] - sent_at[t] for t in texts.values())
    return {
        "failover_s": failover,
        "p50_s": latencies[len(latencies) // 2],
        "p99_s": latencies[int(len(latencies) * 0.99) - 1],
        "max_s": latencies[-1],
        "refused_notices": refused,
    }


def store_errors(replicas: list[Replica]) -> list[str]:
    """The distinct store errors the replicas logged (what callers saw of the failover)."""
    seen: dict[str, None] = {}
    for replica in replicas:
        for line in replica.log.read_text(errors="replace").splitlines():
            if "unavailable" in line.lower():
                seen.setdefault(line[:160] + " ... " + line[-160:], None)
    return list(seen)[:8]


async def test_sentinel_master_killed_midway(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, own_sentinel_set: SentinelSet
) -> None:
    servers = own_sentinel_set
    env = gateway_env(
        tg,
        llm,
        sentinels=json.dumps(servers.addresses),
        sentinel_master=servers.target().sentinel_master,
    )
    replicas = [await start_replica(name, tmp_path, env) for name in ("one", "two")]

    def kill_master() -> float:
        old = servers.master_port()
        print(f"\nkilling the master at {time.strftime('%H:%M:%S')}")
        servers.server_on(old).kill()
        return servers.wait_for_new_master(old)

    try:
        figures = await run_through_a_failover(tg, replicas, kill_master)
    finally:
        codes = [await r.stop() for r in replicas]
    print(f"\nsentinel failover: {json.dumps({k: round(v, 2) for k, v in figures.items()})}")
    print(*store_errors(replicas), sep="\n")
    assert all(r.alive is False for r in replicas)
    assert codes == [0, 0], "\n".join(r.tail() for r in replicas)


def busiest_master(servers: RedisClusterSet) -> tuple[int, int]:
    """The port of the master serving the queue shards of most of the test's sessions (one
    per chat), and one slot it serves of them."""
    sessions = Counter(
        queue_shard(f"telegram:{1000 + chat}", QUEUE_SHARDS) for chat in range(CHATS)
    )
    served: Counter[int] = Counter()
    a_slot: dict[int, int] = {}
    for shard, count in sessions.items():
        slot = key_slot(f"{{q{shard}}}".encode())
        port = servers.master_of_slot(slot).port
        served[port] += count
        a_slot[port] = slot
    port, count = served.most_common(1)[0]
    print(f"\nthe master at {port} serves {count} of {CHATS} sessions")
    return port, a_slot[port]


async def test_cluster_master_killed_midway(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, own_redis_cluster: RedisClusterSet
) -> None:
    servers = own_redis_cluster
    env = gateway_env(tg, llm, cluster_nodes=json.dumps(servers.addresses))
    replicas = [await start_replica(name, tmp_path, env) for name in ("one", "two")]
    port, slot = busiest_master(servers)

    def kill_master() -> float:
        print(f"\nkilling the master at {port} at {time.strftime('%H:%M:%S')}")
        servers.server_on(port).kill()
        return servers.wait_for_failover(slot, port)

    try:
        figures = await run_through_a_failover(tg, replicas, kill_master)
    finally:
        codes = [await r.stop() for r in replicas]
    print(f"\ncluster failover: {json.dumps({k: round(v, 2) for k, v in figures.items()})}")
    print(*store_errors(replicas), sep="\n")
    assert all(r.alive is False for r in replicas)
    assert codes == [0, 0], "\n".join(r.tail() for r in replicas)
