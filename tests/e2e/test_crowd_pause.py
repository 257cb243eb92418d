"""`chatgate run` holds automatic garbage collection off while a crowd of webhook calls
arrives, and turns it back on once intake is quiet (gateway/runtime/collector.py).

The real command runs in a subprocess whose thread samples `gc.isenabled()` every
millisecond and, at exit, prints when the collector went off and on (CLOCK_MONOTONIC, which
this process shares), so the test sees the collector of the process that took the calls.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.llm import ScriptedLLM
from tests.fakes.telegram import FakeBotAPI
from tests.replicas import WEBHOOK_SECRET, Replica, free_port, wait_ready, webhook_env

pytestmark = pytest.mark.e2e

_DRIVER = """
import gc, json, sys, threading, time

changes = [(time.monotonic(), gc.isenabled())]


def sample():
    while True:
        if gc.isenabled() != changes[-1][1]:
            changes.append((time.monotonic(), gc.isenabled()))
        time.sleep(0.001)


threading.Thread(target=sample, daemon=True).start()
from gateway.app.cli import main

code = main(["run"])
time.sleep(0.01)
print("collector:", json.dumps(changes), file=sys.stderr)
sys.exit(code)
"""

CALLS = 300  # far more at once than intake's busy mark (16 in flight)


async def test_the_collector_waits_while_a_crowd_of_webhook_calls_arrives(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    async with FakeBotAPI() as tg:
        port = free_port()
        env = webhook_env(
            tg,
            llm,
            CHATGATE_DATA_DIR=str(tmp_path / "data"),
            CHATGATE_HTTP__HOST="127.0.0.1",
            CHATGATE_HTTP__PORT=str(port),
        )
        log = tmp_path / "gateway.log"
        with log.open("wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _DRIVER, env=env, cwd=tmp_path, stderr=sink
            )
        gateway = Replica("gateway", proc, port, log)
        try:
            await wait_ready(gateway)
            await asyncio.sleep(0.2)
            crowd_came = time.monotonic()
            headers = {"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET}
            connector = aiohttp.TCPConnector(limit=CALLS)
            async with aiohttp.ClientSession(connector=connector) as http:

                async def call(n: int) -> int:
                    update = {"update_id": n, "message": tg.message(f"m{n}", chat_id=n)}
                    url = f"{gateway.url}/telegram/webhook"
                    async with http.post(url, json=update, headers=headers) as response:
                        return response.status

                statuses = await asyncio.gather(*(call(n) for n in range(1, CALLS + 1)))
            assert statuses == [200] * CALLS
            await tg.wait_for(lambda: len(tg.texts()) >= CALLS, 60)
            await asyncio.sleep(0.3)  # quiet again
        finally:
            stopping = time.monotonic()
            assert await gateway.stop() == 0, gateway.tail()
    reported = [line for line in log.read_text().splitlines() if line.startswith("collector: ")]
    assert reported, gateway.tail()
    changes = [(at, on) for at, on in json.loads(reported[-1].removeprefix("collector: "))]
    # On at start; off once the crowd came (not before); on again once it passed, before the
    # gateway was told to stop (whose shutdown would turn it on too).
    assert changes[0][1] is True
    offs = [at for at, on in changes if not on]
    assert offs and min(offs) >= crowd_came, changes
    assert changes[-1][1] is True and changes[-1][0] < stopping, changes
