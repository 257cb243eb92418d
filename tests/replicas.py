"""`chatgate run` replicas as subprocesses on one Redis, for the failover tests and the chaos bench.

Each replica serves Telegram webhooks (and Slack events when configured) on its own HTTP port
and logs to a file; `kill()` sends SIGKILL, as a crashed machine would.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

if TYPE_CHECKING:
    from tests.fakes.llm import ScriptedLLM
    from tests.fakes.telegram import FakeBotAPI

WEBHOOK_SECRET = "replica-secret_1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def base_env(**settings: str) -> dict[str, str]:
    """The parent's environment without CHATGATE_* or proxies, plus `settings`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CHATGATE_") and k.lower() not in ("http_proxy", "https_proxy")
    }
    env.update(settings)
    return env


def telegram_webhook_env(tg: FakeBotAPI) -> dict[str, str]:
    """Telegram in webhook mode against the fake Bot API, with the replicas' secret."""
    return {
        "CHATGATE_TELEGRAM__TOKEN": tg.token,
        "CHATGATE_TELEGRAM__API_URL": tg.url,
        "CHATGATE_TELEGRAM__MODE": "webhook",
        "CHATGATE_TELEGRAM__WEBHOOK_URL": "https://bot.example.org/telegram/webhook",
        "CHATGATE_TELEGRAM__WEBHOOK_SECRET": WEBHOOK_SECRET,
    }


def model_env(llm: ScriptedLLM) -> dict[str, str]:
    """Answers from `llm`, whole (no streaming), with nothing else speaking in the chat: no
    typing notice, no rate limit, no scheduler; logs at INFO for the replica's log file."""
    return {
        "CHATGATE_LLM__BASE_URL": llm.url,
        "CHATGATE_LLM__MODEL": "fake-model",
        "CHATGATE_LLM__STREAM": "false",
        "CHATGATE_ROUTER__TYPING_DELAY": "30",
        "CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE": "0",
        "CHATGATE_SCHEDULER__ENABLED": "false",
        "CHATGATE_LOG_LEVEL": "INFO",
    }


def webhook_env(tg: FakeBotAPI, llm: ScriptedLLM, **extra: str) -> dict[str, str]:
    """One gateway taking Telegram webhooks on the embedded store (its data directory is the
    replica's), answering through `llm`."""
    return base_env(**telegram_webhook_env(tg), **model_env(llm), **extra)


@dataclass
class Replica:
    name: str
    proc: asyncio.subprocess.Process
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    def kill(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)

    async def stop(self) -> int:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), 20)
        except TimeoutError:
            self.kill()
            return await self.proc.wait()

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


async def start_replica(
    name: str, workdir: Path, env: dict[str, str], *, crash_at: str = ""
) -> Replica:
    port = free_port()
    log = workdir / f"{name}.log"
    extra = {
        "CHATGATE_DATA_DIR": str(workdir / name),
        "CHATGATE_HTTP__ENABLED": "true",
        "CHATGATE_HTTP__HOST": "127.0.0.1",
        "CHATGATE_HTTP__PORT": str(port),
    }
    if crash_at:
        extra["CHATGATE_CRASH_AT"] = crash_at
    with log.open("ab") as sink:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.app.cli",
            "run",
            env={**env, **extra},
            cwd=workdir,
            stdout=sink,
            stderr=sink,
        )
    replica = Replica(name, proc, port, log)
    await wait_ready(replica)
    return replica


async def wait_ready(replica: Replica, within: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    async with aiohttp.ClientSession() as http:
        while True:
            if not replica.alive:
                raise AssertionError(f"{replica.name} exited:\n{replica.tail()}")
            try:
                async with http.get(f"{replica.url}/readyz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{replica.name} not ready:\n{replica.tail()}")
            await asyncio.sleep(0.1)


async def post_webhook(replica: Replica, update: dict[str, Any]) -> int | None:
    """POST a Telegram update to a replica's webhook; None when the replica died meanwhile."""
    headers = {"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET}
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{replica.url}/telegram/webhook", json=update, headers=headers) as response,
        ):
            return response.status
    except (aiohttp.ClientError, ConnectionError):
        return None


async def deliver(replicas: list[Replica], update: dict[str, Any], *, start: int = 0) -> int:
    """Deliver an update the way Telegram does: retry on the next replica until one answers
    200 (a balancer spreading webhook calls); returns the index of the one that took it."""
    for attempt in range(len(replicas) * 20):
        index = (start + attempt) % len(replicas)
        replica = replicas[index]
        if replica.alive and await post_webhook(replica, update) == 200:
            return index
        await asyncio.sleep(0.05)
    raise AssertionError(f"no replica took update {update.get('update_id')}")
