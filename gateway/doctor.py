"""`chatgate doctor`: one pass/fail line per thing that must work, with the fix for each."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence

import httpx

from gateway import keys
from gateway.checks import CheckResult, probe_api
from gateway.config import Settings, mask_url
from gateway.llm.client import LLMClient
from gateway.llm.errors import LLMError
from gateway.store import open_store
from gateway.store.base import StoreUnavailable

# One platform's check, bound to its settings by the composition root.
PlatformCheck = Callable[[httpx.AsyncClient], Awaitable[CheckResult]]
# Any other check from outside the core (the composition root passes them): the terminal.
ExtraCheck = Callable[[Settings], Awaitable[list[CheckResult]]]


async def run_checks(
    settings: Settings,
    platforms: Sequence[PlatformCheck] = (),
    *,
    extra: Sequence[ExtraCheck] = (),
) -> list[CheckResult]:
    results = [CheckResult("config", True, "valid")]
    results.append(await _check_store(settings))
    if settings.redis.url and results[-1].ok:
        results.append(await _check_replicas(settings))
    results.append(await _check_llm(settings))
    if platforms:
        async with httpx.AsyncClient(timeout=10) as http:
            for check in platforms:
                results.append(await check(http))
    for more in extra:
        results.extend(await more(settings))
    return results


async def _check_store(settings: Settings) -> CheckResult:
    where = (
        mask_url(settings.redis.url) if settings.redis.url else f"embedded at {settings.data_dir}"
    )
    try:
        store = open_store(settings)
    except StoreUnavailable as exc:
        return CheckResult("store", False, str(exc), "stop the other chatgate process or use Redis")
    try:
        await asyncio.wait_for(store.ping(), timeout=5)
    except (StoreUnavailable, TimeoutError, OSError) as exc:
        return CheckResult(
            "store",
            False,
            f"{where} unreachable ({type(exc).__name__})",
            "start redis-server or fix CHATGATE_REDIS__URL (leave it empty for the embedded store)",
        )
    finally:
        await store.close()
    return CheckResult("store", True, where)


async def _check_replicas(settings: Settings) -> CheckResult:
    """Which gateway processes share this store now, how many sessions each holds, and how
    much waits: from their heartbeats (gateway/session_leases.py) and the session inbox."""
    store = open_store(settings)
    try:
        beats = await store.hgetall(keys.REPLICAS)
        pending, waited = await store.inbox_stats()
    except StoreUnavailable as exc:
        return CheckResult("replicas", False, str(exc))
    finally:
        await store.close()
    now = time.time()
    alive = []
    for instance, raw in sorted(beats.items()):
        beat = json.loads(raw)
        if now - float(beat.get("ts", 0)) <= max(3 * settings.router.lease_ttl, 15):
            alive.append(f"{instance} holds {beat.get('sessions', 0)} session lease(s)")
    queue = f"{pending} message(s) pending, oldest waiting {waited:.0f} s"
    if not alive:
        return CheckResult("replicas", True, f"no gateway running on this store now; {queue}", "")
    return CheckResult("replicas", True, f"{len(alive)} alive: {'; '.join(alive)}; {queue}")


async def _check_llm(settings: Settings) -> CheckResult:
    client = LLMClient(settings.llm.model_copy(update={"max_retries": 0}))
    try:
        detail = await client.check()
    except LLMError as exc:
        return CheckResult(
            "llm",
            False,
            f"{settings.llm.base_url}: {exc.user_message}",
            "check CHATGATE_LLM__BASE_URL, CHATGATE_LLM__MODEL and CHATGATE_LLM__API_KEY",
        )
    finally:
        await client.aclose()
    return CheckResult("llm", True, detail)


__all__ = ["CheckResult", "PlatformCheck", "probe_api", "run_checks"]
