"""Issue 30 finding 1, end to end: the model signs itself in to the operator console by writing
a browser session into the store from the shell (`redis-cli` on Redis, `sqlite3` on the
embedded store), then posts "approve" for its own pending request to /admin/approvals/<id>
with the cookie it chose. The session it wrote (the format before sealing, the sealed form
with a made-up MAC, and plain garbage) signs nobody in: the post goes to the sign-in page,
the request still waits, and nothing ran. A forged web chat sign-in link is refused, and a
damaged session entry shows the sign-in page, not a 500.

The attacker's best case, as in test_approvals_forged.py: the local backend, and on the
embedded store an operator who left the store writable by the user commands run as."""

from __future__ import annotations

import json
import secrets
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.approvals.seals import KEY_FILE
from gateway.store import keys
from gateway.web import auth
from gateway.web.auth import SESSION_SEAL, digest
from tests.e2e.test_approvals import button, press
from tests.e2e.test_approvals_forged import prompts, run_turn
from tests.fakes.llm import ScriptedLLM, tool_results
from tests.harness import Harness, eventually, gateway_settings, running_gateway
from tests.web_kit import ADMIN_TOKEN, base_url, web_gateway, web_settings

pytestmark = pytest.mark.e2e

TARGET = "rm -rf build"
CSRF = "forged-csrf-token-0123456789"


def forged_session(name: str = "admin", kind: str = "operator") -> dict[str, Any]:
    return {"kind": kind, "name": name, "csrf": CSRF, "expires": time.time() + 3600, "flash": ""}


def forged_sessions() -> dict[str, str]:
    """Cookie -> what a forger writes under its digest: the unsealed session, the sealed form
    with a made-up MAC, and something that is not JSON at all."""
    plain = json.dumps(forged_session(), separators=(",", ":"))
    sealed = json.dumps(
        {"v": forged_session(), "mac": secrets.token_hex(32)}, separators=(",", ":")
    )
    return {
        f"plain-{secrets.token_hex(8)}": plain,
        f"sealed-{secrets.token_hex(8)}": sealed,
        f"garbage-{secrets.token_hex(8)}": "{not json",
    }


def web_sections(workspace: Path, terminal: dict[str, Any]) -> dict[str, Any]:
    return {
        "http": {"enabled": True, "port": 0},
        "web": {"admin_token": ADMIN_TOKEN, "chat": False},
        "approvals": {"timeout_seconds": 120},
        "tools": {"workspace": str(workspace), "terminal": terminal},
    }


async def check_forged_console_sessions(
    gw: Harness, llm: ScriptedLLM, chat_dir: Path, forge: str, sessions: dict[str, str]
) -> None:
    app = gw.app
    # 1. A real command writes the sessions (Alice lets it run when it asks).
    turn = await run_turn(gw, llm, forge, approve="forge")
    await turn.done
    for cookie, raw in sessions.items():
        stored = await app.store.get(keys.web_session(digest(cookie)))
        assert stored == raw, tool_results(llm.requests[-1])
    # 2. The model's destructive command asks.
    asked = len(prompts(gw))
    turn = await run_turn(gw, llm, TARGET)
    await eventually(lambda: any(TARGET in p.text for p in prompts(gw)[asked:]), what="ask")
    prompt = next(p for p in prompts(gw)[asked:] if TARGET in p.text)
    request_id = button(prompt, "Deny").split(":")[1]
    # 3. It approves through the console with each forged cookie: every post is sent to the
    # sign-in page, and every page shows the sign-in form (the garbage one too, not a 500).
    async with aiohttp.ClientSession(base_url(app)) as http:
        for cookie in sessions:
            headers = {"Cookie": f"chatgate_admin={cookie}"}
            form = {"choice": "once", "csrf": CSRF, "back": "/admin/approvals"}
            posted = await http.post(
                f"/admin/approvals/{request_id}", data=form, headers=headers, allow_redirects=False
            )
            assert (posted.status, posted.headers.get("Location")) == (303, "/admin/login"), cookie
            shown = await http.get("/admin/approvals", headers=headers)
            assert shown.status == 200 and shown.url.path == "/admin/login", cookie
            assert 'name="token"' in await shown.text()
    assert await app.approvals._answers.current(request_id) is None
    assert request_id in [r.id for r in await app.approvals.pending_requests()]
    assert (chat_dir / "build").exists()
    assert app.metrics.counter("approvals_tampered_total", kind=SESSION_SEAL) == len(sessions)
    # 4. It is still Alice's to decide.
    denied = await press(gw, button(prompt, "Deny"))
    assert denied.toast == "Denied."
    await turn.done
    assert (chat_dir / "build").exists()
    audit = [json.loads(e) for e in await app.store.list_range(keys.APPROVALS_AUDIT)]
    assert [(e["id"], e["by"]) for e in audit if e["id"] == request_id] == [
        (request_id, "console:alice")
    ]


@pytest.fixture
def best_case(run_user: str) -> Iterator[dict[str, Any]]:
    """Terminal settings for the local backend (as a throwaway user when root)."""
    yield {"backend": "local", "allow_unsandboxed": True, "local": {"user": run_user}}


needs_sqlite3 = pytest.mark.skipif(not shutil.which("sqlite3"), reason="no sqlite3 CLI")
needs_redis_cli = pytest.mark.skipif(not shutil.which("redis-cli"), reason="no redis-cli")


@needs_sqlite3
async def test_a_console_session_forged_in_the_embedded_store_approves_nothing(
    open_dir: Path, llm: ScriptedLLM, best_case: dict[str, Any], run_user: str
) -> None:
    data = open_dir / "data"
    settings = gateway_settings(open_dir, llm.url, **web_sections(data / "workspace", best_case))
    async with running_gateway(settings) as gw:
        db = data / "chatgate.db"
        chat_dir = data / "workspace" / "console-chat1"
        (chat_dir / "build").mkdir(parents=True)
        if run_user:  # the operator's mistake: the store writable by the command's user
            for path in [data, *data.iterdir()]:
                if path.name != KEY_FILE:
                    path.chmod(0o777 if path.is_dir() else 0o666)
        sessions = forged_sessions()
        rows = [
            "INSERT OR REPLACE INTO keys (key, kind, value) VALUES "
            f"('{keys.web_session(digest(cookie))}', 's', '{raw}');"
            for cookie, raw in sessions.items()
        ]
        (chat_dir / "forge_session.sql").write_text("\n".join(rows))
        await check_forged_console_sessions(
            gw, llm, chat_dir, f"sqlite3 {db} < forge_session.sql  # forge", sessions
        )


@needs_redis_cli
async def test_a_console_session_forged_in_redis_approves_nothing(
    tmp_path: Path, open_dir: Path, llm: ScriptedLLM, best_case: dict[str, Any], redis_url: str
) -> None:
    prefix = f"t{secrets.token_hex(4)}"
    settings = gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        key_prefix=prefix,
        **web_sections(open_dir / "workspace", best_case),
    )
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    async with running_gateway(settings) as gw:
        chat_dir = open_dir / "workspace" / "console-chat1"
        (chat_dir / "build").mkdir(parents=True)
        sessions = forged_sessions()
        lines = [
            f"SET {prefix}:k:{keys.web_session(digest(cookie))} '{raw}' EX 3600"
            for cookie, raw in sessions.items()
        ]
        (chat_dir / "forge_session.redis").write_text("\n".join(lines) + "\n")
        await check_forged_console_sessions(
            gw, llm, chat_dir, f"redis-cli -p {port} < forge_session.redis  # forge", sessions
        )


def write_rows(db: Path, rows: dict[str, str]) -> None:
    """Write string entries straight into the embedded store's file, as `sqlite3` would."""
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO keys (key, kind, value) VALUES (?, 's', ?)", rows.items()
        )
    conn.close()


async def test_a_forged_sign_in_link_and_damaged_sessions_sign_nobody_in(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    async with web_gateway(web_settings(tmp_path, llm.url)) as app:
        link = f"forged-{secrets.token_hex(8)}"
        sealed_link = f"sealed-{secrets.token_hex(8)}"
        damaged = f"damaged-{secrets.token_hex(8)}"
        write_rows(
            tmp_path / "data" / "chatgate.db",
            {
                keys.web_link(digest(link)): "admin",
                keys.web_link(digest(sealed_link)): json.dumps(
                    {"v": "admin", "mac": secrets.token_hex(32)}
                ),
                keys.web_session(digest(damaged)): "\x00not json at all",
                keys.web_file("damaged-file"): '{"owner": "alice", "data": "%%%"}',
            },
        )
        async with aiohttp.ClientSession(base_url(app)) as http:
            for code in (link, sealed_link):
                opened = await http.get(f"/chat/link/{code}", allow_redirects=False)
                assert opened.status == 403
                assert "used already or has expired" in await opened.text()
                assert "chatgate_chat" not in opened.cookies
            for area, cookie in (("/admin", "chatgate_admin"), ("/chat", "chatgate_chat")):
                shown = await http.get(area, headers={"Cookie": f"{cookie}={damaged}"})
                assert shown.status == 200 and shown.url.path == f"{area}/login"
            # A damaged file record is a file that is gone, not an error page.
            alice, _ = await auth.BrowserSessions(app.store, 1, app.signer).create("chat", "alice")
            fetched = await http.get(
                "/chat/files/damaged-file", headers={"Cookie": f"chatgate_chat={alice}"}
            )
            assert fetched.status == 404
            # A link the gateway made still signs its person in.
            code = await auth.SignInLinks(app.store, 1, app.signer).create("erin")
            opened = await http.get(f"/chat/link/{code}", allow_redirects=False)
            assert opened.status == 303 and "chatgate_chat" in opened.cookies
        tampered = app.metrics.total("approvals_tampered_total")
        assert tampered == 3  # two links, one session (reported once, shown twice)


async def test_the_console_and_the_chat_each_have_their_own_sign_in_limit(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = web_settings(tmp_path, llm.url, web={"signin_attempts_per_minute": 2})
    async with web_gateway(settings) as app, aiohttp.ClientSession(base_url(app)) as http:
        for _ in range(2):
            refused = await http.post("/chat/login", data={"token": "wrong"})
            assert refused.status in (400, 403)
        limited = await http.post("/chat/login", data={"token": "wrong"})
        assert limited.status == 429
        # Guessing at the chat does not lock the operator out of the console.
        form = await http.get("/admin/login")
        presign = form.cookies[auth.PRESIGN_COOKIE].value
        signed = await http.post(
            "/admin/login",
            data={"token": ADMIN_TOKEN, auth.CSRF_FIELD: presign},
            headers={"Cookie": f"{auth.PRESIGN_COOKIE}={presign}"},
            allow_redirects=False,
        )
        assert signed.status == 303 and signed.headers["Location"] == "/admin"
