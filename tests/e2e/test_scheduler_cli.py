"""`chatgate cron list | remove | runs` as an operator runs them: a subprocess reading the store
directly, with and without a gateway running."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

from tests.fakes.llm import ScriptedLLM
from tests.harness import Harness, gateway_settings, running_gateway

FAST = {"leader_ttl": 1.0, "misfire_grace_seconds": 3.0}


def _env(tmp_path: Path, redis_url: str = "", prefix: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env["CHATGATE_DATA_DIR"] = str(tmp_path / "data")
    if redis_url:
        env.update(CHATGATE_REDIS__URL=redis_url, CHATGATE_REDIS__KEY_PREFIX=prefix)
    return env


async def cron(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.app.cli",
        "cron",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def remind(gw: Harness, args: str, **where: str) -> str:
    reply = (await gw.say(f"/remind {args}", **where)).reply or ""
    assert reply.startswith("Reminder "), reply
    return reply.split()[1]


async def test_list_runs_and_remove_on_the_embedded_store(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, scheduler=FAST)
    async with running_gateway(settings) as gw:
        await asyncio.sleep(0.1)
        fired = await remind(gw, "1s stretch")
        later = await remind(gw, "every weekday 8:30 Europe/Berlin standup", chat_id="chat2")
        for _ in range(100):
            if await gw.app.scheduler.book.runs(fired):
                break
            await asyncio.sleep(0.05)

        # The embedded store serves one process: the CLI says so while the gateway runs.
        code, out, err = await cron(_env(tmp_path), "list")
        assert code == 1 and out == ""
        assert "already in use by another chatgate process" in err
        assert "Stop the running gateway" in err

    env = _env(tmp_path)
    code, out, _ = await cron(env, "list")
    assert code == 0
    assert f"{later} [message] every weekday 8:30 Europe/Berlin (next " in out
    assert " 08:30 CE" in out and ") in console:chat2: Reminder: standup" in out
    assert out.strip().endswith("1 job(s)")

    code, out, _ = await cron(env, "runs", fired)
    assert code == 0 and "(removed or finished)" in out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("due ")]
    assert "delivered" in line and "message_id=" in line and "attempts=1" in line

    code, out, _ = await cron(env, "runs", later)
    assert code == 0 and "no runs yet" in out

    code, out, _ = await cron(env, "remove", later)
    assert code == 0 and out.startswith(f"removed job {later} in console:chat2")
    code, out, _ = await cron(env, "list")
    assert out.strip() == "0 job(s)"
    code, _, err = await cron(env, "remove", later)
    assert code == 1 and "no job" in err and "chatgate cron list" in err


async def test_remove_with_redis_while_the_gateway_runs(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    prefix = f"cli-{uuid.uuid4().hex[:8]}"
    settings = gateway_settings(
        tmp_path, llm.url, redis_url=redis_url, key_prefix=prefix, scheduler=FAST
    )
    async with running_gateway(settings) as gw:
        for _ in range(100):
            if gw.app.scheduler.is_leader:
                break
            await asyncio.sleep(0.05)
        # Due late enough that two CLI runs (about 2 s each on a loaded machine) come first.
        set_at = time.monotonic()
        job = await remind(gw, "8s never")
        code, out, _ = await cron(_env(tmp_path, redis_url, prefix), "list")
        assert code == 0 and job in out
        code, out, err = await cron(_env(tmp_path, redis_url, prefix), "remove", job)
        assert code == 0, (out, err)
        await asyncio.sleep(max(9.0 - (time.monotonic() - set_at), 0))
        assert "Reminder: never" not in gw.texts
