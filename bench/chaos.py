"""Chaos: replicas on one Redis take Telegram webhooks while one of them is killed again and again.

Prints a table; not a test. Three `chatgate run` replicas share a private redis-server; a
driver plays Telegram through a round-robin balancer that retries a failed POST on the next
replica (as Telegram retries a webhook). 100 chats send 10 messages each, the next one as
soon as the previous is answered; every 8 s one replica is killed with SIGKILL and started
again 2 s later. The model takes 3 s per answer (`--llm-delay`), so the run lasts long enough
for kills to land while turns are in flight. Counted: replicas killed, messages answered once,
more than once (duplicated), never (lost), and the latency from the first POST to the answer
arriving at the fake Bot API.

    .venv/bin/python bench/chaos.py [--chats 100] [--messages 10] [--kill-every 8]
        [--llm-delay 3] [--no-kills]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.llm import Reply, ScriptedLLM, last_user_text  # noqa: E402
from tests.fakes.telegram import Call, FakeBotAPI  # noqa: E402
from tests.fixtures_redis import RedisServer  # noqa: E402
from tests.replicas import WEBHOOK_SECRET, Replica, base_env, deliver, start_replica  # noqa: E402

ANSWER_WITHIN = 60.0  # a message not answered by then counts as lost


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="chatgate-chaos-"))
    (work / "redis").mkdir()
    redis = RedisServer(work / "redis")
    redis.start()

    async def echo(request: dict[str, object]) -> Reply:
        return Reply.text(f"echo: {last_user_text(request)}", delay=args.llm_delay)

    async with ScriptedLLM() as llm, FakeBotAPI() as tg:
        llm.responder = echo
        answered: dict[str, list[float]] = {}
        arrived = asyncio.Event()

        def on_call(call: Call) -> None:
            if call.method == "sendMessage" and call.text.startswith("echo: "):
                answered.setdefault(call.text.removeprefix("echo: "), []).append(time.monotonic())
                arrived.set()

        tg.listeners.append(on_call)
        env = base_env(
            CHATGATE_TELEGRAM__TOKEN=tg.token,
            CHATGATE_TELEGRAM__API_URL=tg.url,
            CHATGATE_TELEGRAM__MODE="webhook",
            CHATGATE_TELEGRAM__WEBHOOK_URL="https://bot.example.org/telegram/webhook",
            CHATGATE_TELEGRAM__WEBHOOK_SECRET=WEBHOOK_SECRET,
            CHATGATE_REDIS__URL=redis.url,
            CHATGATE_LLM__BASE_URL=llm.url,
            CHATGATE_LLM__MODEL="fake-model",
            CHATGATE_LLM__STREAM="false",
            CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE="0",
            CHATGATE_ROUTER__QUEUE_NOTICE="false",
            CHATGATE_TOOLS__TERMINAL__ALLOW_UNSANDBOXED="true",
            CHATGATE_LOG_LEVEL="WARNING",
        )
        replicas: list[Replica] = [
            await start_replica(f"r{n}", work, env) for n in range(args.replicas)
        ]
        sent_at: dict[str, float] = {}
        done = asyncio.Event()

        async def chat(n: int) -> None:
            for m in range(args.messages):
                text = f"chat {n} message {m}"
                update = {
                    "update_id": n * 1000 + m + 1,
                    "message": tg.message(text, chat_id=1000 + n, user_id=1000 + n),
                }
                sent_at[text] = time.monotonic()
                await deliver(replicas, update, start=random.randrange(len(replicas)))
                deadline = time.monotonic() + ANSWER_WITHIN
                while text not in answered and time.monotonic() < deadline:
                    arrived.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(arrived.wait(), 1.0)

        async def chaos() -> int:
            kills = 0
            while not done.is_set():
                await asyncio.sleep(args.kill_every)
                if done.is_set():
                    break
                index = random.randrange(len(replicas))
                replicas[index].kill()
                await replicas[index].proc.wait()
                kills += 1
                await asyncio.sleep(2.0)
                replicas[index] = await start_replica(f"r{index}-{kills}", work, env)
            return kills

        killer = None if args.no_kills else asyncio.create_task(chaos())
        started = time.monotonic()
        await asyncio.gather(*(chat(n) for n in range(args.chats)))
        elapsed = time.monotonic() - started
        done.set()
        kills = 0 if killer is None else await killer
        await asyncio.sleep(8.0)  # late duplicates would arrive by now
        for replica in replicas:
            await replica.stop()
    redis.stop()

    counts = Counter(len(answered.get(text, [])) for text in sent_at)
    latencies = sorted(
        (answered[text][0] - sent_at[text]) * 1000 for text in sent_at if text in answered
    )
    total = len(sent_at)
    lost = counts.get(0, 0)
    duplicated = sum(c for n, c in counts.items() if n > 1)
    p50 = statistics.median(latencies) if latencies else float("nan")
    p99 = latencies[int(len(latencies) * 0.99) - 1] if latencies else float("nan")
    label = "no kills" if args.no_kills else f"kill every {args.kill_every:g} s"
    print("| run | messages | kills | answered once | duplicated | lost | p50 | p99 | wall |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {label} | {total} | {kills} | {counts.get(1, 0)} | {duplicated} | {lost} | "
        f"{p50:.0f} ms | {p99:.0f} ms | {elapsed:.0f} s |"
    )
    if not args.no_kills and kills == 0:
        print("No replica was killed: the run ended first (use more --messages or --llm-delay).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--kill-every", type=float, default=8.0)
    # A model taking seconds, as real ones do: 100 chats x 10 messages then last ~35 s, so
    # several kills land while turns are in flight.
    parser.add_argument("--llm-delay", type=float, default=3.0)
    parser.add_argument("--no-kills", action="store_true")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
