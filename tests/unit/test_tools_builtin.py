"""The built-in toolset as installed: every tool in one declared toolset, lean schemas, hooks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from pydantic import Field

from gateway.app.tool_wiring import ToolServices, install_builtin_tools
from gateway.config import Settings
from gateway.sdk.channels import Outbox
from gateway.sdk.extensions import Extensions
from gateway.sdk.messages import ButtonPress, ChatRef, UserRef
from gateway.store.embedded import EmbeddedStore
from gateway.turn.memory import MemoryBook
from tools.args import ToolArgs
from tools.registry import ToolRegistry
from tools.toolsets import TOOLSETS


@pytest_asyncio.fixture
async def installed(
    tmp_path: Path,
) -> AsyncIterator[tuple[ToolRegistry, ToolServices, Extensions]]:
    settings = Settings(data_dir=tmp_path)
    store = EmbeddedStore(tmp_path / "store")
    extensions = Extensions()
    services = ToolServices(
        settings, store, MemoryBook(store, settings.memory), Outbox(), extensions
    )
    registry = ToolRegistry()
    install_builtin_tools(registry, services)
    yield registry, services, extensions
    for close in services.closers:
        await close()
    await store.close()


def test_every_tool_is_in_one_declared_toolset(installed: Any) -> None:
    registry, _services, _ = installed
    names = registry.names()
    assert {
        "read_file",
        "write_file",
        "edit_file",
        "glob",
        "search",
        "web_fetch",
        "web_search",
        "web_extract",
        "web_crawl",
        "memory",
        "todo",
        "clarify",
        "shell",
        "execute_code",
    } <= set(names)
    assert len(names) == len(set(names))
    for tool in registry.all():
        assert tool.group in TOOLSETS, tool.name


# tools/shell/tool.py's ShellArgs does not derive from tools.args.ToolArgs yet; doing so would
# save ~150 characters per LLM call. Drop it from this set once it does.
NOT_YET_LEAN: set[str] = set()


def test_schemas_are_lean(installed: Any) -> None:
    registry, _services, _ = installed
    for tool in registry.all():
        if tool.name in NOT_YET_LEAN:
            continue
        text = json.dumps(tool.schema())
        assert '"title"' not in text and "$ref" not in text and "$defs" not in text, tool.name
        assert '"type": "null"' not in text, tool.name
        # shell needs a few more words: what waits for approval and what never runs.
        assert len(tool.description) <= (400 if tool.name == "shell" else 240), tool.name


async def test_clarify_hooks_are_installed(installed: Any) -> None:
    _registry, services, extensions = installed
    # Closers: the terminal backend, the clarify listener, the LLM client sub-agents get when
    # none is given, and the browser when a Chromium is installed (launched on first use).
    assert len(extensions.middlewares("questions")) == 1
    owners = sorted(type(close.__self__).__name__ for close in services.closers)
    browser = ["BrowserManager"] if "browser_navigate" in _registry.names() else []
    assert owners == sorted(["BackendChoice", "ClarifyService", "LLMClient", *browser])
    press = ButtonPress(
        event_id="e",
        chat=ChatRef(platform="x", chat_id="1"),
        user=UserRef(platform="x", user_id="u"),
        data="cq:gone:0",
    )
    reply = await services.extensions.press(press)
    assert reply.alert and "expired" in reply.toast  # handled by clarify, not "unknown button"


class Nested(ToolArgs):
    title: str = Field(description="a property really called title")
    note: str | None = None


class Outer(ToolArgs):
    items: list[Nested]
    maybe: Nested | None = None


def test_lean_schema_inlines_refs_and_keeps_a_title_property() -> None:
    schema = Outer.model_json_schema()
    item = schema["properties"]["items"]["items"]
    assert set(item["properties"]) == {"title", "note"}
    assert item["properties"]["title"] == {
        "description": "a property really called title",
        "type": "string",
    }
    assert item["properties"]["note"] == {"type": "string"}
    assert schema["properties"]["maybe"]["type"] == "object"
    assert "$defs" not in schema and "title" not in schema
