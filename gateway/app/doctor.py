"""`chatgate doctor`: one pass/fail line per thing that must work, with the fix for each."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence

import httpx

from gateway.approvals.seals import REPLICA_NOTE, key_path, key_problem
from gateway.config import DEFAULT_PROVIDER, ConfigError, Settings, mask_url
from gateway.llm.client import LLMClient
from gateway.llm.errors import LLMError
from gateway.llm.providers import ModelTarget, ProviderPool
from gateway.profiles.book import ProfileBook, Resolution
from gateway.sdk.checks import CheckResult, probe_api
from gateway.sessions.dead_letters import DeadLetters
from gateway.store import keys, open_store, redis_target
from gateway.store.base import StoreRefused, StoreUnavailable

# One platform's check, bound to its settings by the composition root.
PlatformCheck = Callable[[httpx.AsyncClient], Awaitable[CheckResult]]
# Any other check from outside the core (the composition root passes them): the terminal.
ExtraCheck = Callable[[Settings], Awaitable[list[CheckResult]]]

# One connect timeout of the Redis store (5 s), a probe of the other protocol after it (1 s)
# and the PING: a server in the other protocol is then named, not reported unreachable.
STORE_PING_SECONDS = 8.0


async def run_checks(
    settings: Settings,
    platforms: Sequence[PlatformCheck] = (),
    *,
    extra: Sequence[ExtraCheck] = (),
) -> list[CheckResult]:
    results = [CheckResult("config", True, "valid")]
    results.append(await _check_store(settings))
    if settings.redis.enabled and results[-1].ok:
        results.append(await _check_replicas(settings))
    if results[1].ok:
        results.append(await _check_dead_letters(settings))
    results.extend(await check_models(settings))
    results.extend(check_profiles(settings))
    results.append(_check_approvals_key(settings))
    if platforms:
        async with httpx.AsyncClient(timeout=10) as http:
            for check in platforms:
                results.append(await check(http))
    for more in extra:
        results.extend(await more(settings))
    return results


async def _check_store(settings: Settings) -> CheckResult:
    where = f"embedded at {settings.data_dir}"
    if settings.redis.enabled:
        from gateway.store.redis_topology import describe_topology

        try:
            where = await asyncio.wait_for(describe_topology(redis_target(settings)), 10)
        except Exception as exc:
            where = mask_url(settings.redis.url) if settings.redis.url else f"Redis ({exc})"
    try:
        store = open_store(settings)
    except StoreUnavailable as exc:
        return CheckResult("store", False, str(exc), "stop the other chatgate process or use Redis")
    try:
        await asyncio.wait_for(store.ping(), timeout=STORE_PING_SECONDS)
    except StoreRefused as exc:
        return CheckResult("store", False, str(exc), "fix the settings it names")
    except (StoreUnavailable, TimeoutError, OSError) as exc:
        return CheckResult(
            "store",
            False,
            f"{where} unreachable ({type(exc).__name__})",
            "start redis-server or fix CHATGATE_REDIS__URL, __SENTINELS or __CLUSTER_NODES "
            "(leave them empty for the embedded store)",
        )
    finally:
        await store.close()
    return CheckResult("store", True, where)


def _check_approvals_key(settings: Settings) -> CheckResult:
    problem = key_problem(settings)
    if problem is not None:
        return CheckResult(
            "approvals key",
            False,
            problem,
            "set approvals.secret (openssl rand -hex 32) or let the gateway's user write "
            "the data directory",
        )
    if settings.approvals.secret.get_secret_value():
        return CheckResult("approvals key", True, "approvals.secret")
    detail = f"{key_path(settings)} (made at first start when missing)"
    if settings.redis.enabled:
        detail += f"; {REPLICA_NOTE}"
    return CheckResult("approvals key", True, detail)


async def _check_replicas(settings: Settings) -> CheckResult:
    """Which gateway processes share this store now, how many sessions each holds, and how
    much waits: from their heartbeats (gateway/sessions/leases.py) and the session inbox."""
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


async def _check_dead_letters(settings: Settings) -> CheckResult:
    """Messages set aside after failing every attempt (gateway/sessions/dead_letters.py): each is a
    question nobody answered."""
    store = open_store(settings)
    try:
        letters = await DeadLetters(store).list()
    except StoreUnavailable as exc:
        return CheckResult("dead letters", False, str(exc))
    finally:
        await store.close()
    if not letters:
        return CheckResult("dead letters", True, "none")
    newest = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(letters[-1].at))
    return CheckResult(
        "dead letters",
        False,
        f"{len(letters)} message(s) failed every attempt and were set aside (newest {newest})",
        "see them with `chatgate dead-letters list`, then `retry ID` or `drop ID` each",
    )


async def check_models(settings: Settings) -> list[CheckResult]:
    """Every provider with its own model, and every other model a profile names."""
    pool = ProviderPool(settings.llm)
    wanted = [pool.target(name) for name in settings.llm.provider_names]
    for profile in settings.profiles.named.values():
        wanted.append(pool.target(profile.provider, profile.model))
        wanted.extend(pool.target(ref) for ref in [*profile.fallback, *profile.models])
    results = []
    for target in dict.fromkeys(wanted):
        results.append(await _check_model(settings, pool, target))
    return results


async def _check_model(settings: Settings, pool: ProviderPool, target: ModelTarget) -> CheckResult:
    provider = settings.llm.provider_settings(target.provider)
    name = "llm" if target.provider == DEFAULT_PROVIDER else f"llm.providers.{target.provider}"
    if target.model != provider.model:
        name += f" ({target.model})"
    info = pool.info(target)
    client = LLMClient(info.settings.model_copy(update={"max_retries": 0}))
    try:
        detail = await client.check()
    except LLMError as exc:
        if target.provider == DEFAULT_PROVIDER:
            fix = "check CHATGATE_LLM__BASE_URL, CHATGATE_LLM__MODEL and CHATGATE_LLM__API_KEY"
        else:
            fix = f"check base_url, model and api_key in [llm.providers.{target.provider}]"
        return CheckResult(name, False, f"{info.settings.base_url}: {exc.user_message}", fix)
    finally:
        await client.aclose()
    return CheckResult(name, True, detail)


def check_profiles(settings: Settings) -> list[CheckResult]:
    """Each profile (its models and prompt) and each binding (what it matches, whether an
    earlier rule hides it)."""
    try:
        book = ProfileBook(settings)
    except ConfigError as exc:
        return [CheckResult("profiles", False, "; ".join(exc.problems), "fix the prompt file")]
    pool = ProviderPool(settings.llm)
    results = []
    for name, profile in settings.profiles.named.items():
        chain = [pool.target(profile.provider, profile.model)]
        chain += [pool.target(ref) for ref in profile.fallback]
        prompt = book.prompt(Resolution(name, profile, ""))
        source = f"prompt from {profile.system_prompt_file}" if profile.system_prompt_file else ""
        source = source or ("own prompt" if profile.system_prompt else "agent.system_prompt")
        detail = f"{' -> '.join(str(t) for t in dict.fromkeys(chain))}; {source} "
        results.append(CheckResult(f"profile {name}", True, detail + f"({len(prompt)} chars)"))
    hidden = book.shadowed()
    for index, rule in enumerate(settings.profiles.bind):
        problem = next((p for p in hidden if p.startswith(f"profiles.bind[{index}] ")), None)
        check = f"profiles.bind[{index}]"
        if problem is not None:
            results.append(
                CheckResult(
                    check, False, problem, "remove the rule or make it match something else"
                )
            )
        else:
            results.append(CheckResult(check, True, f"{rule.describe()} -> {rule.profile}"))
    return results


__all__ = ["CheckResult", "PlatformCheck", "probe_api", "run_checks"]
