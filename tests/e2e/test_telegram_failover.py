"""Two `chatgate run` processes on one Redis with Telegram polling: exactly one polls, and when
it is killed (-9) the other takes over within about 10 s and nothing is answered twice."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from pathlib import Path

from tests.fakes.llm import ScriptedLLM
from tests.fakes.telegram import FakeBotAPI

POLLING_STARTED = "telegram polling started"


class Gateway:
    """One `chatgate run` subprocess; its log goes to a file the test reads."""

    def __init__(self, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.proc = proc
        self.log = log

    @property
    def polling(self) -> bool:
        return POLLING_STARTED in self.log.read_text(errors="replace")


async def start_gateway(name: str, tmp_path: Path, env: dict[str, str]) -> Gateway:
    log = tmp_path / f"{name}.log"
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.app.cli",
            "run",
            env={**env, "CHATGATE_DATA_DIR": str(tmp_path / name)},
            cwd=tmp_path,
            stdout=sink,
            stderr=sink,
        )
    return Gateway(proc, log)


async def wait_until(predicate: object, within: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():  # type: ignore[operator]
        if time.monotonic() - started > within:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def test_one_poller_and_takeover_after_kill(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    async with FakeBotAPI() as tg:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
        env.update(
            CHATGATE_TELEGRAM__TOKEN=tg.token,
            CHATGATE_TELEGRAM__API_URL=tg.url,
            CHATGATE_TELEGRAM__POLL_TIMEOUT="1",
            CHATGATE_REDIS__URL=redis_url,
            CHATGATE_REDIS__KEY_PREFIX=f"failover{uuid.uuid4().hex[:8]}",
            CHATGATE_LLM__BASE_URL=llm.url,
            CHATGATE_LLM__MODEL="fake-model",
            CHATGATE_HTTP__ENABLED="false",
            CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE="0",
            CHATGATE_LOG_LEVEL="INFO",
        )
        gateways = [await start_gateway(n, tmp_path, env) for n in ("first", "second")]
        try:
            await wait_until(lambda: any(g.polling for g in gateways), 20, "a leader polls")
            first = tg.push_message("before the crash")
            await tg.wait_sent(1, within=10)
            # Let the follower try for the lease a few times: it must not poll.
            await asyncio.sleep(2.5)
            leaders = [g for g in gateways if g.polling]
            assert len(leaders) == 1, "exactly one process polls"
            [leader] = leaders
            [follower] = [g for g in gateways if g is not leader]

            leader.proc.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            await leader.proc.wait()
            tg.push_message("after the crash")
            await tg.wait_sent(2, within=15)
            takeover = time.monotonic() - killed_at
            assert follower.polling
            assert takeover < 10.0, f"takeover took {takeover:.1f} s"

            # Telegram redelivers an update a dead poller never confirmed: answered once only.
            tg.push_update(tg.pushed[first])
            tg.push_message("still here?")
            await tg.wait_sent(3, within=10)
            await asyncio.sleep(0.5)
            assert tg.texts() == [
                "echo: before the crash",
                "echo: after the crash",
                "echo: still here?",
            ]
            assert tg.conflicts == 0  # never two getUpdates at once
            assert len(llm.requests) == 3
        finally:
            for gateway in gateways:
                if gateway.proc.returncode is None:
                    gateway.proc.send_signal(signal.SIGTERM)
            codes = [await asyncio.wait_for(g.proc.wait(), 15) for g in gateways]
        assert codes[gateways.index(follower)] == 0, follower.log.read_text()[-3000:]
        # The log never shows the token, even though every Bot API URL contains it.
        assert tg.token not in follower.log.read_text()
