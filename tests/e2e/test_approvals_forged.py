"""Issue 22 finding 2, end to end: the model approves its own requests by writing into the store
from the shell. The real shell tool runs `sqlite3` on the embedded store, or `redis-cli` on
Redis, writing a standing grant and a decision for a pending request exactly where and how
the gateway stores them (the formats before and after the fix), with anything but the key.
The command still asks, the pending request is still undecided, and nothing ran.

The attacker's best case is built on purpose: an operator put the workspace inside the data
directory and, on the embedded store, left the store writable by the user commands run as.
The key itself stays out of reach: a root gateway's commands run as another user, and the
sandbox hides the data directory (checked below)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.approvals.grants import grant_field, location
from gateway.approvals.seals import KEY_FILE
from gateway.sdk.messages import Outbound
from gateway.sdk.tooling import ToolContext
from gateway.store import keys
from tests.e2e.test_approvals import button, press
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import Harness, eventually, gateway_settings, running_gateway
from tools.shell.tool import ShellArgs

TARGET = "rm -rf build"


def prompts(gw: Harness) -> list[Outbound]:
    return [out for out in gw.console.sent if out.buttons]


async def run_turn(gw: Harness, llm: ScriptedLLM, *calls: str, approve: str = "") -> Any:
    """A turn in which the model makes `calls` (at once); prompts whose text contains
    `approve` are approved once by Alice, as a person who did not look closely would."""
    done = f"finished {len(llm.requests)}"
    llm.push(Reply.calls(*(("shell", {"command": c}) for c in calls)), Reply.text(done))
    seen = len(prompts(gw))
    turn = await gw.submit("go on")
    if approve:
        # The commands ask at once (the calls run in parallel): wait for the one to approve.
        def mine() -> list[Outbound]:
            return [p for p in prompts(gw)[seen:] if approve in p.text]

        await eventually(lambda: bool(mine()) or turn.done.done(), what="its prompt")
        for prompt in mine():
            await press(gw, button(prompt, "Approve once"))
    return turn


def forged_grant(gw: Harness, shape: str) -> tuple[str, dict[str, str]]:
    """The hash and its fields a forger writes: a grant in the old format (field = shape)
    and one in the new format, complete and correct except for its MAC."""
    session = str(gw.app.session_key(gw.console.inbound("x")))
    name = location("session", session)
    grant = {
        "id": "f0f0f0f0",
        "scope": "session",
        "place": session,
        "owner": "console:alice",
        "owner_label": "alice",
        "tool": "shell",
        "shape": shape,
        "command": TARGET,
        "by": "console:alice",
        "by_label": "alice",
        "at": time.time(),
    }
    envelope = json.dumps({"v": grant, "mac": secrets.token_hex(32)}, separators=(",", ":"))
    field = grant_field("console:alice", "shell", shape)
    return name, {shape: "console:alice", field: envelope}


FORGED_DECISION = json.dumps({"choice": "once", "by": "alice", "by_address": "console:alice"})


async def target_shape(gw: Harness) -> str:
    spec = gw.app.tools.get("shell")
    assert spec is not None and spec.approval is not None
    ctx = ToolContext(
        session=gw.app.session_key(gw.console.inbound("x")),
        chat=gw.console.chat,
        user=gw.console.inbound("x").sender,
    )
    need = await spec.approval(ShellArgs(command=TARGET), ctx)
    assert need is not None
    return need.shape


async def check_forgeries_ignored(
    gw: Harness,
    llm: ScriptedLLM,
    chat_dir: Path,
    forged: tuple[str, dict[str, str]],
    forge_grant: str,
    forge_answer: str,
) -> None:
    grant_store, fields = forged
    # 1. The forged grant is written by a real command, then the target still asks.
    turn = await run_turn(gw, llm, forge_grant, approve="forge")
    await turn.done
    stored = await gw.app.store.hgetall(grant_store)
    assert stored == fields, tool_results(llm.requests[-1])
    asked = len(prompts(gw))
    # 2. The target asks; meanwhile a second command answers the pending request (it may
    # ask itself, depending on how it reaches the store: then Alice lets it run).
    turn = await run_turn(gw, llm, TARGET, forge_answer)
    await eventually(lambda: any(TARGET in p.text for p in prompts(gw)[asked:]), what="ask")
    prompt = next(p for p in prompts(gw)[asked:] if TARGET in p.text)
    request_id = button(prompt, "Deny").split(":")[1]
    naive = keys.rendezvous_answer("approvals", request_id)
    pressed: set[str] = set()
    for _ in range(500):
        if await gw.app.store.get(naive) is not None:
            break
        for forger in prompts(gw)[asked:]:
            if "forge" in forger.text and forger.text not in pressed:
                pressed.add(forger.text)
                await press(gw, button(forger, "Approve once"))
        await asyncio.sleep(0.02)
    assert await gw.app.store.get(naive) == FORGED_DECISION
    assert await gw.app.approvals._answers.current(request_id) is None
    assert (chat_dir / "build").exists()
    denied = await press(gw, button(prompt, "Deny"))
    assert denied.toast == "Denied."  # still the person's to decide
    await turn.done
    assert (chat_dir / "build").exists()
    assert gw.app.metrics.counter("approvals_tampered_total", kind="grant") == 1


@pytest.fixture
def best_case(run_user: str) -> Iterator[dict[str, Any]]:
    """Terminal settings for the local backend (as a throwaway user when root)."""
    yield {
        "backend": "local",
        "allow_unsandboxed": True,
        "local": {"user": run_user},
    }


needs_sqlite3 = pytest.mark.skipif(not shutil.which("sqlite3"), reason="no sqlite3 CLI")
needs_redis_cli = pytest.mark.skipif(not shutil.which("redis-cli"), reason="no redis-cli")


@needs_sqlite3
async def test_forged_entries_in_the_embedded_store_are_ignored(
    open_dir: Path, llm: ScriptedLLM, best_case: dict[str, Any], run_user: str
) -> None:
    data = open_dir / "data"
    settings = gateway_settings(
        open_dir,
        llm.url,
        tools={"workspace": str(data / "workspace"), "terminal": best_case},
    )
    async with running_gateway(settings) as gw:
        db = data / "chatgate.db"
        chat_dir = data / "workspace" / "console-chat1"
        (chat_dir / "build").mkdir(parents=True)
        if run_user:  # the operator's mistake: the store writable by the command's user
            for path in [data, *data.iterdir()]:
                if path.name != KEY_FILE:
                    path.chmod(0o777 if path.is_dir() else 0o666)
        forged = name, fields = forged_grant(gw, await target_shape(gw))
        rows = [
            f"INSERT INTO keys (key, kind) VALUES ('{name}', 'h') ON CONFLICT DO NOTHING;",
            *(
                f"INSERT OR REPLACE INTO fields VALUES ('{name}', '{f}', '{v}');"
                for f, v in fields.items()
            ),
        ]
        (chat_dir / "forge_grant.sql").write_text("\n".join(rows))
        (chat_dir / "forge_answer.sql").write_text(
            "INSERT OR REPLACE INTO keys (key, kind, value) SELECT 'approvals:answer:' "
            f"|| field, 's', '{FORGED_DECISION}' FROM fields WHERE key = 'approvals:pending';"
        )
        await check_forgeries_ignored(
            gw,
            llm,
            chat_dir,
            forged,
            f"sqlite3 {db} < forge_grant.sql  # forge",
            f"sleep 0.5; sqlite3 {db} < forge_answer.sql  # forge",
        )
        if run_user:
            # The key itself: a file of the gateway's user that commands cannot read.
            turn = await run_turn(gw, llm, f"cat {data / KEY_FILE}  # forge", approve="forge")
            await turn.done
            [output] = tool_results(llm.requests[-1])
            assert "Permission denied" in output
            assert (data / KEY_FILE).read_text().strip() not in output


@needs_redis_cli
async def test_forged_entries_in_redis_are_ignored(
    tmp_path: Path, open_dir: Path, llm: ScriptedLLM, best_case: dict[str, Any], redis_url: str
) -> None:
    prefix = f"t{secrets.token_hex(4)}"
    settings = gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        key_prefix=prefix,
        tools={"workspace": str(open_dir / "workspace"), "terminal": best_case},
    )
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    async with running_gateway(settings) as gw:
        chat_dir = open_dir / "workspace" / "console-chat1"
        (chat_dir / "build").mkdir(parents=True)
        forged = name, fields = forged_grant(gw, await target_shape(gw))
        hset = [f"HSET {prefix}:k:{name} '{f}' '{v}'" for f, v in fields.items()]
        (chat_dir / "forge_grant.redis").write_text("\n".join(hset) + "\n")
        (chat_dir / "decision.json").write_text(FORGED_DECISION)
        pending = f"{prefix}:k:{keys.APPROVALS_PENDING}"
        await check_forgeries_ignored(
            gw,
            llm,
            chat_dir,
            forged,
            f"redis-cli -p {port} < forge_grant.redis  # forge",
            f"sleep 0.5; for id in $(redis-cli -p {port} HKEYS {pending}); do "
            f'redis-cli -p {port} SET "{prefix}:k:approvals:answer:$id" "$(cat decision.json)"; '
            "done  # forge",
        )


async def test_the_key_is_out_of_reach_of_sandboxed_commands(
    tmp_path: Path, llm: ScriptedLLM, make_sandbox: Any
) -> None:
    make_sandbox()  # skips when bwrap cannot sandbox here
    data = tmp_path / "data"
    # The worst case: the workspace inside the data directory, next to the key and store.
    settings = gateway_settings(tmp_path, llm.url, tools={"workspace": str(data / "ws")})
    async with running_gateway(settings) as gw:
        key = (data / KEY_FILE).read_text().strip()
        command = f"cat ../../{KEY_FILE} {data / KEY_FILE}; ls -a ../.. {data}  # key"
        (data / "ws" / "console-chat1").mkdir(parents=True)
        turn = await run_turn(gw, llm, command, approve="key")
        await turn.done
        [output] = tool_results(llm.requests[-1])
        assert output.count(f"{KEY_FILE}: No such file or directory") == 2
        assert key not in output and "chatgate.db" not in output
        assert KEY_FILE not in output.splitlines()  # not listed by ls either
        assert os.stat(data / KEY_FILE).st_mode & 0o077 == 0
