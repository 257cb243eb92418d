"""The MCP client against real servers written with the SDK (tests/fakes/mcp_server.py): stdio
children and HTTP servers on 127.0.0.1, driven through `MCPManager` as the gateway uses it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.approvals.untrusted import wrap
from gateway.config import MCPSettings
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError, ToolSpec
from gateway.sessions.key import SessionKey
from tests.fakes.mcp_launch import http_server, stdio_server, wait_for
from tools.mcp.connection import State
from tools.mcp.manager import MCPManager
from tools.mcp.transport import Mode

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def running(
    servers: dict[str, Any], *, mode: Mode = "auto", max_chars: int = 4000
) -> AsyncIterator[MCPManager]:
    settings = MCPSettings.model_validate({"servers": servers, "reconnect_min_seconds": 0.05})
    manager = MCPManager(settings, max_output_chars=max_chars, mode=mode)
    await manager.start()
    try:
        await manager.wait_settled()
        yield manager
    finally:
        await manager.stop()


def spec(manager: MCPManager, name: str) -> ToolSpec[Any]:
    found = {s.name: s for s in manager.tools()}
    assert name in found, f"{name} not in {sorted(found)}"
    return found[name]


# A call outside a turn whose model sees images: tools give text only.
CONTEXT = ToolContext(
    session=SessionKey("console", "c1"),
    chat=ChatRef(platform="console", chat_id="c1"),
    user=UserRef(platform="console", user_id="u1"),
)


async def call(manager: MCPManager, tool_name: str, **arguments: Any) -> str:
    tool = spec(manager, tool_name)
    return await tool.handler(tool.args.model_validate(arguments), CONTEXT)


async def test_stdio_tools_results_errors_and_limits(tmp_path: Path) -> None:
    server = stdio_server(tmp_path / "s", timeout_seconds=1.5)
    async with running({"notes": server}, max_chars=1000) as manager:
        [status] = manager.statuses()
        assert (status.state, status.transport, status.protocol) == (
            State.CONNECTED,
            "stdio",
            "2026-07-28",
        )
        names = {s.name for s in manager.tools()}
        assert {"mcp_notes_echo", "mcp_notes_delete_note", "mcp_notes_grow"} <= names
        echo = spec(manager, "mcp_notes_echo")
        assert echo.group == "mcp:notes"
        schema = echo.schema()["function"]
        assert schema["parameters"]["required"] == ["text"]
        # The server's words, marked as outside content (issue 30 finding 14).
        marked = wrap("MCP server notes", "Repeat the text back.")
        assert schema["description"] == f"{marked}\n(MCP server 'notes', tool 'echo')"
        assert await call(manager, "mcp_notes_echo", text="hi") == "echo: hi"
        assert await call(manager, "mcp_notes_add", a=2, b=40) == "42"
        # The model's arguments are checked against the server's schema before any call.
        with pytest.raises(ValueError, match="'b' is a required property"):
            spec(manager, "mcp_notes_add").args.model_validate({"a": 1})

        with pytest.raises(
            ToolError,
            match=r"(?s)fail on MCP server 'notes' failed: <untrusted-data.*cannot do that",
        ):
            await call(manager, "mcp_notes_fail", reason="no")
        assert await call(manager, "mcp_notes_picture") == (
            "a tiny picture\n[image: image/png, 68 B]"
        )
        long = await call(manager, "mcp_notes_long_text", chars=5000)
        assert long.startswith("x" * 1000) and "4000 more characters cut" in long
        with pytest.raises(ToolError, match=r"did not answer slow within 1\.5 s"):
            await call(manager, "mcp_notes_slow", seconds=30)
        assert await call(manager, "mcp_notes_echo", text="still here") == "echo: still here"

        conn = manager.connection("notes")
        assert conn is not None
        [resource] = await conn.list_resources()
        assert (str(resource.uri), resource.mime_type) == ("notes://readme", "text/markdown")
        read = await conn.read_resource("notes://readme")
        assert read.contents[0].text.startswith("# Notes")  # type: ignore[union-attr]
        [prompt] = await conn.list_prompts()
        assert prompt.name == "summarize"
        got = await conn.get_prompt("summarize", {"topic": "MCP"})
        assert got.messages[0].content.text == "Please summarize MCP in three bullet points."  # type: ignore[union-attr]


async def test_streamable_http_with_a_bearer_header(tmp_path: Path) -> None:
    async with http_server(tmp_path / "h", token="s3cret-token") as url:
        good = {"url": url, "headers": {"Authorization": "Bearer s3cret-token"}}
        bad = {
            "url": url,
            "headers": {"Authorization": "Bearer wrong"},
            "startup_timeout_seconds": 5,
        }
        async with running({"notes": good, "wrong": bad}) as manager:
            notes, wrong = manager.statuses()
            assert (notes.state, notes.transport) == (State.CONNECTED, "http")
            assert await call(manager, "mcp_notes_echo", text="over http") == "echo: over http"
            assert wrong.state in (State.FAILED, State.STARTING)  # it is retried
            assert "the server answered HTTP 401 (check the server's headers" in wrong.reason
            assert not [s for s in manager.tools() if s.name.startswith("mcp_wrong_")]


async def test_legacy_sse_transport_and_tool_filters(tmp_path: Path) -> None:
    async with http_server(tmp_path / "h", sse=True) as url:
        old = {"url": url, "include_tools": ["*_note", "echo"], "exclude_tools": ["write*"]}
        async with running({"old": old}) as manager:
            [status] = manager.statuses()
            assert (status.state, status.transport, status.protocol) == (
                State.CONNECTED,
                "sse",
                "2025-11-25",
            )
            assert sorted(s.name for s in manager.tools()) == [
                "mcp_old_delete_note",
                "mcp_old_echo",
            ]
            assert await call(manager, "mcp_old_echo", text="sse") == "echo: sse"


async def test_list_changed_on_a_handshake_era_connection(tmp_path: Path) -> None:
    # The gateway test covers 2026-07-28 (subscriptions/listen); servers of the initialize era
    # send notifications/tools/list_changed on the session instead.
    async with running({"notes": stdio_server(tmp_path / "s")}, mode="legacy") as manager:
        assert manager.statuses()[0].protocol == "2025-11-25"
        assert "mcp_notes_fresh" not in {s.name for s in manager.tools()}
        assert await call(manager, "mcp_notes_grow", name="fresh") == "added fresh"
        await wait_for(lambda: "mcp_notes_fresh" in {s.name for s in manager.tools()})
        assert await call(manager, "mcp_notes_fresh", text="hello") == "fresh: hello"


async def test_servers_that_fail_are_reported_with_their_reason(tmp_path: Path) -> None:
    exits = "import sys; print('GITHUB_TOKEN is not set', file=sys.stderr, flush=True); sys.exit(1)"
    hangs = "import sys; sys.stdin.read()"  # never answers; exits when stdin closes
    servers = {
        "missing": {"command": str(tmp_path / "no-such-program")},
        "exits": {"command": sys.executable, "args": ["-c", exits], "env": {"TOKEN": "tok-123456"}},
        "hangs": {"command": sys.executable, "args": ["-c", hangs], "startup_timeout_seconds": 0.5},
        "off": {"command": "unused", "enabled": False},
    }
    async with running(servers) as manager:
        states = {s.name: (s.state, s.reason) for s in manager.statuses()}
        assert "command not found" in states["missing"][1]
        assert "GITHUB_TOKEN is not set" in states["exits"][1]
        assert "no answer within 0.5 s (startup_timeout_seconds)" in states["hangs"][1]
        assert states["off"] == (State.STOPPED, "disabled")
        assert manager.tools() == []
        assert set(manager.groups()) == {"mcp:missing", "mcp:exits", "mcp:hangs", "mcp:off"}
