"""Telegram throughput: chatgate next to a bare python-telegram-bot echo bot, same fake Bot API.

Prints a table; not a test. 50 chats each send 20 messages, the next one as soon as the
previous is answered (as people do), all chats at once. Latency is from the update being
available on the fake Bot API to the reply's sendMessage arriving there. Each bot runs in
its own process, the instant scripted LLM in another, the fake and the driver in this one.

    .venv/bin/python bench/telegram_throughput.py [--chats 50] [--messages 20] [--rounds 3]
        [--only chatgate-embedded,chatgate-redis] [--set CHATGATE_LLM__STREAM=false]

"bot CPU ms/msg" is the bot process's user+system CPU per message: on a machine where the
bot saturates a core, msg/s follows it. BENCH_PROFILE=/tmp/p writes a cProfile of each bot
process to /tmp/p-<bot>-<round>.prof.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.llm import ScriptedLLM  # noqa: E402
from tests.fakes.telegram import Call, FakeBotAPI  # noqa: E402
from tests.fixtures_redis import RedisServer  # noqa: E402

# -- the processes under test ---------------------------------------------------------------


def serve_echo_bot(api_url: str, token: str, concurrent: bool) -> None:
    """The floor: PTB's echo example, nothing else."""
    from telegram import Update
    from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters

    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None and update.message.text is not None
        await update.message.reply_text(update.message.text)

    app = (
        ApplicationBuilder()
        .token(token)
        .base_url(f"{api_url}/bot")
        .concurrent_updates(concurrent)
        .build()
    )
    app.add_handler(MessageHandler(filters.TEXT, echo))
    app.run_polling(timeout=1)  # a standalone bot owns its loop; fine here


def serve_adapter_echo(api_url: str, token: str) -> None:
    """chatgate's Telegram adapter alone: each message is echoed by the adapter's own send,
    with no router, store or LLM in between. Isolates the adapter's cost from the core's."""
    from adapters.telegram import TelegramAdapter
    from adapters.telegram.settings import TelegramSettings
    from gateway.approvals.seals import EntrySigner
    from gateway.runtime.metrics import Metrics
    from gateway.sdk import Status, Submission, finished
    from gateway.sdk.channels import AdapterContext
    from gateway.sdk.extensions import Extensions
    from gateway.sdk.messages import Inbound, Outbound, PressReply
    from gateway.store.embedded import EmbeddedStore

    async def main() -> None:
        store = EmbeddedStore(Path(tempfile.mkdtemp()))
        adapter: TelegramAdapter | None = None

        async def submit(inbound: Inbound) -> Submission:
            assert adapter is not None
            await adapter.send(Outbound(chat=inbound.chat, text=inbound.text))
            return finished(Status.COMMAND)  # answered here, as a command would be

        async def press(_: object) -> PressReply:
            return PressReply(toast="")

        ctx = AdapterContext(
            submit=submit,
            press=press,
            store=store,
            extensions=Extensions(),
            metrics=Metrics(),
            http=None,
            commands=list,
            instance_id="bench",
            signer=EntrySigner(secrets.token_bytes(32)),
        )
        settings = TelegramSettings(token=token, api_url=api_url, poll_timeout=1)
        adapter = TelegramAdapter(settings, ctx)
        await adapter.start()
        await asyncio.Event().wait()

    asyncio.run(main())


def serve_llm() -> None:
    async def main() -> None:
        # An instant echo that keeps no request bodies (a real model runs elsewhere).
        async with ScriptedLLM(record=False) as llm:
            print(llm.url, flush=True)
            await asyncio.Event().wait()

    asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Child:
    pid: int
    first_line: str


@asynccontextmanager
async def child(
    *args: str, env: dict[str, str] | None = None, first_line: bool = False
) -> AsyncIterator[Child]:
    """A subprocess of this script or of `chatgate`; its pid and first stdout line if asked."""
    log = tempfile.NamedTemporaryFile(prefix="bench-", suffix=".log", delete=False)  # noqa: SIM115
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=log, cwd=ROOT
    )
    try:
        assert proc.stdout is not None
        first = ""
        if first_line:
            first = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
        yield Child(proc.pid, first)
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
        log.close()
        os.unlink(log.name)


# -- the load ---------------------------------------------------------------------------------


async def drive(tg: FakeBotAPI, chats: int, per_chat: int, marker: str) -> dict[str, float]:
    """Closed loop per chat; returns messages/s and latency percentiles in ms."""
    waiting: dict[int, tuple[str, asyncio.Future[float]]] = {}

    def on_call(call: Call) -> None:
        if call.method != "sendMessage" or call.status != 200:
            return
        entry = waiting.get(call.params["chat_id"])
        if entry is not None and entry[0] in call.text and not entry[1].done():
            entry[1].set_result(call.at)

    tg.listeners.append(on_call)
    latencies: list[float] = []
    loop = asyncio.get_running_loop()

    async def one_chat(chat: int) -> None:
        for n in range(per_chat):
            text = f"{marker} chat {chat} message {n}"
            future: asyncio.Future[float] = loop.create_future()
            waiting[chat] = (text, future)
            update_id = tg.push_message(text, chat_id=chat, user_id=chat)
            answered_at = await asyncio.wait_for(future, 60)
            latencies.append((answered_at - tg.pushed_at[update_id]) * 1000)

    started = time.monotonic()
    try:
        await asyncio.gather(*(one_chat(1000 + c) for c in range(chats)))
    finally:
        tg.listeners.remove(on_call)
    elapsed = time.monotonic() - started
    latencies.sort()
    return {
        "rate": len(latencies) / elapsed,
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


def redis_calls(server: RedisServer) -> int:
    """Commands the bench's redis-server has run so far (a script counts once, as EVALSHA)."""
    client = redis.Redis(port=server.port)
    try:
        return int(client.info("stats")["total_commands_processed"])
    finally:
        client.close()


async def measure(
    tg: FakeBotAPI, bot: Child, chats: int, per_chat: int, redis_server: RedisServer
) -> dict[str, float]:
    # A warm-up round (one message per chat) opens connections and fills caches.
    await drive(tg, chats, 1, "warm-up")
    messages = chats * per_chat
    cpu, fakes, llm = cpu_seconds(bot.pid), cpu_seconds(os.getpid()), cpu_seconds(LLM_PID[0])
    redis_cpu, calls = cpu_seconds(redis_server.pid), redis_calls(redis_server)
    result = await drive(tg, chats, per_chat, "bench")
    result["cpu"] = (cpu_seconds(bot.pid) - cpu) * 1000 / messages
    # The rest of the machine's work per message: the fake Bot API with this driver, the
    # scripted LLM (the echo bots never call it) and redis-server (only the Redis store uses
    # it; heartbeats count too). All share the same CPUs as the bot.
    result["fakes"] = (cpu_seconds(os.getpid()) - fakes) * 1000 / messages
    result["llm"] = (cpu_seconds(LLM_PID[0]) - llm) * 1000 / messages
    result["redis"] = (cpu_seconds(redis_server.pid) - redis_cpu) * 1000 / messages
    result["calls"] = (redis_calls(redis_server) - calls) / messages
    return result


LLM_PID = [0]  # the scripted LLM's process, set once it runs


SETTINGS: dict[str, str] = {}  # --set NAME=VALUE: more CHATGATE_* settings for chatgate


def chatgate_env(tg: FakeBotAPI, llm_url: str, data_dir: str, redis_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env.update(
        CHATGATE_TELEGRAM__TOKEN=tg.token,
        CHATGATE_TELEGRAM__API_URL=tg.url,
        CHATGATE_LLM__BASE_URL=llm_url,
        CHATGATE_LLM__MODEL="fake-model",
        CHATGATE_DATA_DIR=data_dir,
        CHATGATE_HTTP__ENABLED="false",
        CHATGATE_LOG_LEVEL="WARNING",
    )
    env.update(SETTINGS)
    if redis_url:
        env.update(CHATGATE_REDIS__URL=redis_url, CHATGATE_REDIS__KEY_PREFIX=uuid.uuid4().hex[:8])
    return env


BOTS = (
    ("PTB echo bot (floor)", "echo"),
    ("PTB echo bot, concurrent_updates", "echo-concurrent"),
    ("chatgate adapter alone (no core)", "adapter"),
    ("chatgate, embedded store", "chatgate-embedded"),
    ("chatgate, Redis store", "chatgate-redis"),
)


async def run_bot(
    kind: str, chats: int, per_chat: int, llm_url: str, redis: RedisServer, tmp: str, tag: str
) -> dict[str, float]:
    # BENCH_PROFILE=/tmp/x writes a cProfile of each bot process to /tmp/x-<tag>.prof.
    profile = os.environ.get("BENCH_PROFILE")
    pre = ["-m", "cProfile", "-o", f"{profile}-{tag}.prof"] if profile else []
    async with FakeBotAPI() as tg:
        if kind.startswith("echo"):
            args = [*pre, __file__, "--echo-bot", tg.url, tg.token]
            if kind == "echo-concurrent":
                args.append("--concurrent")
            async with child(*args) as bot:
                return await measure(tg, bot, chats, per_chat, redis)
        if kind == "adapter":
            async with child(*pre, __file__, "--adapter-echo", tg.url, tg.token) as bot:
                return await measure(tg, bot, chats, per_chat, redis)
        redis_url = redis.url if kind == "chatgate-redis" else ""
        env = chatgate_env(tg, llm_url, tempfile.mkdtemp(dir=tmp), redis_url)
        async with child(*pre, "-m", "gateway.app.cli", "run", env=env) as bot:
            return await measure(tg, bot, chats, per_chat, redis)


async def main(chats: int, per_chat: int, rounds: int, only: list[str]) -> None:
    bots = [(name, kind) for name, kind in BOTS if not only or kind in only]
    results: dict[str, list[dict[str, float]]] = {kind: [] for _, kind in bots}
    with tempfile.TemporaryDirectory() as tmp:
        redis = RedisServer(Path(tmp))
        redis.start()
        try:
            async with child(__file__, "--llm-server", first_line=True) as llm:
                LLM_PID[0] = llm.pid
                # Rounds interleave the bots, so a busy moment on the machine hits all of them.
                for round_no in range(rounds):
                    for _, kind in bots:
                        tag = f"{kind}-{round_no}"
                        result = await run_bot(
                            kind, chats, per_chat, llm.first_line, redis, tmp, tag
                        )
                        results[kind].append(result)
        finally:
            redis.stop()
    rows = [(name, _median_round(results[kind])) for name, kind in bots]
    floor = _median_round(results["echo"])["rate"] if "echo" in results else None
    print(
        f"\n{chats} chats x {per_chat} messages, closed loop, median of {rounds} round(s); "
        f"{os.cpu_count()} CPUs\n"
    )
    print(
        f"| {'bot':<34} | {'msg/s':>7} | {'of floor':>8} | {'p50 ms':>7} | {'p99 ms':>7} "
        f"| {'bot CPU ms/msg':>14} | {'fake API ms/msg':>15} | {'LLM ms/msg':>10} "
        f"| {'Redis ms/msg':>12} | {'Redis calls/msg':>15} |"
    )
    print(
        f"|{'-' * 36}|{'-' * 9}|{'-' * 10}|{'-' * 9}|{'-' * 9}|{'-' * 16}|{'-' * 17}|{'-' * 12}"
        f"|{'-' * 14}|{'-' * 17}|"
    )
    for name, r in rows:
        share = f"{r['rate'] / floor:.0%}" if floor else "-"
        print(
            f"| {name:<34} | {r['rate']:7.0f} | {share:>8} | {r['p50']:7.1f} | {r['p99']:7.1f} "
            f"| {r['cpu']:14.2f} | {r['fakes']:15.2f} | {r['llm']:10.2f} "
            f"| {r['redis']:12.2f} | {r['calls']:15.1f} |"
        )


def _median_round(rounds: list[dict[str, float]]) -> dict[str, float]:
    return sorted(rounds, key=lambda r: r["rate"])[len(rounds) // 2]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="median of this many runs")
    parser.add_argument(
        "--only", default="", help="bots to run, comma-separated: " + ",".join(k for _, k in BOTS)
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="CHATGATE_NAME=VALUE",
        help="a setting for chatgate, e.g. CHATGATE_LLM__STREAM=false",
    )
    parser.add_argument("--llm-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--echo-bot", nargs=2, metavar=("API_URL", "TOKEN"), help=argparse.SUPPRESS)
    parser.add_argument("--concurrent", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--adapter-echo", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.llm_server:
        serve_llm()
    elif args.adapter_echo:
        serve_adapter_echo(*args.adapter_echo)
    elif args.echo_bot:
        api_url, token = args.echo_bot
        serve_echo_bot(api_url, token, concurrent=args.concurrent)
    else:
        SETTINGS.update(item.split("=", 1) for item in args.set)
        only = [kind for kind in args.only.split(",") if kind]
        asyncio.run(main(args.chats, args.messages, args.rounds, only))
