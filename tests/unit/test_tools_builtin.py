"""The built-in toolset as installed: every tool in one declared toolset, lean schemas, hooks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from pydantic import Field

from gateway.app.tool_wiring import ToolServices, builtin_families, register_families
from gateway.config import Settings
from gateway.sdk.channels import Outbox
from gateway.sdk.extensions import Extensions
from gateway.sdk.families import ToolFamily
from gateway.sdk.messages import ButtonPress, ChatRef, UserRef
from gateway.store.embedded import EmbeddedStore
from gateway.turn.memory import MemoryBook
from tools.args import ToolArgs
from tools.registry import ToolRegistry
from tools.toolsets import TOOLSETS


@pytest_asyncio.fixture
async def installed(
    tmp_path: Path,
) -> AsyncIterator[tuple[ToolRegistry, list[ToolFamily], Extensions]]:
    settings = Settings(data_dir=tmp_path)
    store = EmbeddedStore(tmp_path / "store")
    extensions = Extensions()
    services = ToolServices(
        settings, store, MemoryBook(store, settings.memory), Outbox(), extensions
    )
    registry = ToolRegistry()
    families = builtin_families(services, registry)
    register_families(registry, extensions, families)
    yield registry, families, extensions
    for family in reversed(families):
        await family.close()
    await store.close()


def test_every_tool_is_in_one_declared_toolset(installed: Any) -> None:
    registry, _families, _ = installed
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
    registry, _families, _ = installed
    for tool in registry.all():
        if tool.name in NOT_YET_LEAN:
            continue
        text = json.dumps(tool.schema())
        assert '"title"' not in text and "$ref" not in text and "$defs" not in text, tool.name
        assert '"type": "null"' not in text, tool.name
        # shell needs a few more words: what waits for approval and what never runs.
        assert len(tool.description) <= (400 if tool.name == "shell" else 240), tool.name


def test_families_in_the_order_their_tools_are_offered(installed: Any) -> None:
    registry, families, _ = installed
    assert [family.name for family in families] == [
        "workspace_wipe",
        "files",
        "find",
        "attachments",
        "media",
        "terminal",
        "web_fetch",
        "web_search",
        "web_extract",
        "browser",
        "memory",
        "todo",
        "cron",
        "send",
        "clarify",
        "skills",
        "skill_manage",
        "delegate",
        "session_search",
        "mcp",
    ]
    declared = [spec.name for family in families for spec in family.specs()]
    assert declared == registry.names()
    # Sub-agents got no client, so the delegate family made its own; it goes with the family.
    (delegate,) = [family for family in families if family.name == "delegate"]
    assert delegate.own_llm


async def test_clarify_hooks_are_installed(installed: Any) -> None:
    _registry, _families, extensions = installed
    assert len(extensions.middlewares("questions")) == 1
    press = ButtonPress(
        event_id="e",
        chat=ChatRef(platform="x", chat_id="1"),
        user=UserRef(platform="x", user_id="u"),
        data="cq:gone:0",
    )
    reply = await extensions.press(press)
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
