"""`chatgate doctor`: one pass/fail line per thing that must work, with the fix for each."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from gateway.config import Settings, mask_url
from gateway.llm.client import LLMClient
from gateway.llm.errors import LLMError
from gateway.store import open_store
from gateway.store.base import StoreUnavailable


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    fix: str = ""


# One platform's check, bound to its settings by the composition root.
PlatformCheck = Callable[[httpx.AsyncClient], Awaitable[CheckResult]]


async def run_checks(
    settings: Settings, platforms: Sequence[PlatformCheck] = ()
) -> list[CheckResult]:
    results = [CheckResult("config", True, "valid")]
    results.append(await _check_store(settings))
    results.append(await _check_llm(settings))
    if platforms:
        async with httpx.AsyncClient(timeout=10) as http:
            for check in platforms:
                results.append(await check(http))
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


async def probe_api(
    http: httpx.AsyncClient,
    name: str,
    method: str,
    url: str,
    headers: dict[str, str],
    field: str,
    fix: str,
) -> CheckResult:
    """Call a platform's "who am I" endpoint with its token: pass when it answers 200 (and,
    for APIs that wrap results, `ok`), naming the bot from `field` of the reply."""
    try:
        response = await http.request(method, url, headers=headers)
        data = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        # The URL may hold the token (Telegram), so only the error type is shown.
        return CheckResult(name, False, f"API unreachable ({type(exc).__name__})", fix)
    payload = data.get("result", data) if isinstance(data, dict) else {}
    ok = response.status_code == 200 and isinstance(payload, dict) and data.get("ok", True)
    if not ok:
        return CheckResult(name, False, f"token rejected (HTTP {response.status_code})", fix)
    return CheckResult(name, True, f"token valid, bot {payload.get(field, '?')}")
