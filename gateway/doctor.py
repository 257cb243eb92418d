"""`chatgate doctor`: one pass/fail line per thing that must work, with the fix for each."""

from __future__ import annotations

import asyncio
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


async def run_checks(settings: Settings) -> list[CheckResult]:
    results = [CheckResult("config", True, "valid")]
    results.append(await _check_store(settings))
    results.append(await _check_llm(settings))
    results.extend(await _check_platforms(settings))
    results.append(_check_browser(settings))
    return results


def _check_browser(settings: Settings) -> CheckResult:
    from tools.browser.chromium import describe  # the browser package owns its check

    ok, detail, fix = describe(settings.browser)
    return CheckResult("browser", ok, detail, fix)


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


async def _check_platforms(settings: Settings) -> list[CheckResult]:
    checks = []
    async with httpx.AsyncClient(timeout=10) as http:
        if settings.telegram.token:
            token = settings.telegram.token.get_secret_value()
            url = f"{settings.telegram.api_url.rstrip('/')}/bot{token}/getMe"
            checks.append(
                await _probe(
                    http,
                    "telegram",
                    "GET",
                    url,
                    {},
                    "username",
                    "check CHATGATE_TELEGRAM__TOKEN (from @BotFather)",
                )
            )
        if settings.slack.bot_token:
            headers = {"Authorization": f"Bearer {settings.slack.bot_token.get_secret_value()}"}
            url = settings.slack.api_url.rstrip("/") + "/auth.test"
            checks.append(
                await _probe(
                    http,
                    "slack",
                    "POST",
                    url,
                    headers,
                    "user",
                    "check CHATGATE_SLACK__BOT_TOKEN (xoxb-...)",
                )
            )
        if settings.discord.token:
            headers = {"Authorization": f"Bot {settings.discord.token.get_secret_value()}"}
            url = settings.discord.api_url.rstrip("/") + "/users/@me"
            checks.append(
                await _probe(
                    http,
                    "discord",
                    "GET",
                    url,
                    headers,
                    "username",
                    "check CHATGATE_DISCORD__TOKEN (Developer Portal > Bot)",
                )
            )
    return checks


async def _probe(
    http: httpx.AsyncClient,
    name: str,
    method: str,
    url: str,
    headers: dict[str, str],
    field: str,
    fix: str,
) -> CheckResult:
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
