"""Start-up cost: how long `chatgate --help` takes, and how much memory `chatgate run` holds
when idle with only Telegram configured (embedded store, the HTTP server on, one message
answered, then quiet), beside a bare python-telegram-bot bot that makes the same model call,
and beside that bot importing the libraries `chatgate run` holds at that point besides it
(the floor under chatgate's own code).

Prints a table; not a test.

    .venv/bin/python bench/startup.py [--runs 10] [--settle 5] [--python PATH]

`--python` runs chatgate (and the bare bot) under another interpreter, such as a virtualenv
with only `chatgate[telegram]` installed: the development environment also holds the test
tools, which some libraries import when they find them (httpx loads rich for its CLI).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.llm import ScriptedLLM  # noqa: E402
from tests.fakes.telegram import FakeBotAPI  # noqa: E402

PYTHON = sys.executable


def help_times(runs: int) -> tuple[float, float, int]:
    """Median and best wall time of `chatgate --help`, and its peak RSS in KB."""
    walls: list[float] = []
    rss = 0
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%M", PYTHON, "-m", "gateway.app.cli", "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        walls.append(time.perf_counter() - started)
        rss = max(rss, int(done.stderr.strip().splitlines()[-1]))
    return statistics.median(walls), min(walls), rss


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PTB_BOT = """
import sys, httpx
from telegram.ext import ApplicationBuilder, MessageHandler, filters
api, token, llm = sys.argv[1:4]
async def answer(update, context):
    async with httpx.AsyncClient() as http:
        r = await http.post(llm + "/chat/completions", json={"model": "fake-model",
            "messages": [{"role": "user", "content": update.message.text}]})
    await update.message.reply_text(r.json()["choices"][0]["message"]["content"])
app = ApplicationBuilder().token(token).base_url(api + "/bot").build()
app.add_handler(MessageHandler(filters.TEXT, answer))
app.run_polling()
"""

# What an idle Telegram-only `chatgate run` imports that the bare bot does not: its HTTP
# server and LLM pool, its settings, /metrics, the event loop, the embedded store, the TOML
# reader and the watcher of sent files.
CHATGATE_LIBRARIES = (
    "aiohttp",
    "aiohttp.web",
    "pydantic",
    "pydantic_settings",
    "prometheus_client",
    "uvloop",
    "sqlite3",
    "tomllib",
    "asyncinotify",
)


async def idle_rss(kind: str, settle: float) -> int:
    async with ScriptedLLM(record=False) as llm, FakeBotAPI() as tg:
        with tempfile.TemporaryDirectory() as data:
            if kind == "chatgate":
                env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
                env.update(
                    CHATGATE_TELEGRAM__TOKEN=tg.token,
                    CHATGATE_TELEGRAM__API_URL=tg.url,
                    CHATGATE_LLM__BASE_URL=llm.url,
                    CHATGATE_LLM__MODEL="fake-model",
                    CHATGATE_DATA_DIR=data,
                    CHATGATE_HTTP__PORT=str(free_port()),
                    CHATGATE_LOG_LEVEL="WARNING",
                )
                args = ["-m", "gateway.app.cli", "run"]
            else:
                env = dict(os.environ)
                preload = f"import {', '.join(CHATGATE_LIBRARIES)}\n" if kind == "ptb+libs" else ""
                args = ["-c", preload + PTB_BOT, tg.url, tg.token, llm.url]
            proc = await asyncio.create_subprocess_exec(
                PYTHON, *args, env=env, cwd=ROOT, stderr=subprocess.DEVNULL
            )
            try:
                tg.push_message("hello", chat_id=7, user_id=7)
                await tg.wait_sent(1, chat_id=7, within=60)
                await asyncio.sleep(settle)
                return rss_kb(proc.pid)
            finally:
                proc.terminate()
                await proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--python", default=sys.executable, help="the interpreter to measure")
    args = parser.parse_args()
    global PYTHON
    PYTHON = args.python
    median, best, help_rss = help_times(args.runs)
    chatgate = asyncio.run(idle_rss("chatgate", args.settle))
    ptb = asyncio.run(idle_rss("ptb", args.settle))
    floor = asyncio.run(idle_rss("ptb+libs", args.settle))
    print("| measure | figure |\n|---|---|")
    print(
        f"| `chatgate --help`, wall (median / best of {args.runs}) | "
        f"{median * 1000:.0f} / {best * 1000:.0f} ms |"
    )
    print(f"| `chatgate --help`, peak RSS | {help_rss / 1024:.0f} MB |")
    print(f"| `chatgate run`, Telegram only, idle RSS | {chatgate / 1024:.0f} MB |")
    print(f"| bare PTB bot with the same model call, idle RSS | {ptb / 1024:.0f} MB |")
    print(f"| that bot importing chatgate's libraries too, idle RSS | {floor / 1024:.1f} MB |")


if __name__ == "__main__":
    main()
