"""Tool families as objects: a handler is a method a test calls alone (no wiring, no registry,
no gateway), and a family declares its tools, the extensions it adds, and what it closes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gateway.app.tool_wiring import register_families
from gateway.approvals.seals import EntrySigner
from gateway.config import MCPSettings, MemorySettings, Settings
from gateway.sdk.channels import Outbox
from gateway.sdk.extensions import Extensions
from gateway.sdk.families import ToolFamily
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError
from gateway.sessions.key import SessionKey
from gateway.store.base import Store
from gateway.turn.memory import MemoryBook, MemoryScope
from tools.agent.clarify import ClarifyService
from tools.agent.todo import TodoArgs, TodoItem, TodoTools
from tools.files.edit import EditFileArgs, FileTools, ReadFileArgs, WriteFileArgs
from tools.files.find import FindTools, GlobArgs
from tools.files.workspaces import Workspaces
from tools.mcp.install import MCPTools
from tools.memory.notes import MemoryArgs, MemoryTools
from tools.registry import ToolRegistry
from tools.schedule.cron import CronTools, ListJobsArgs
from tools.skills.library import SkillArgs, SkillLibrary, SkillTools
from tools.web.browser import BrowserTools
from tools.web.netguard import AddressGuard
from tools.web.search import NOT_CONFIGURED, WebSearchArgs, WebSearchTools

ROOT = Path(__file__).resolve().parents[2]
CTX = ToolContext(
    session=SessionKey("console", "c"),
    chat=ChatRef(platform="console", chat_id="c"),
    user=UserRef(platform="console", user_id="u"),
)


def files(root: Path, *, max_chars: int = 16000, confirm_overwrite: bool = False) -> FileTools:
    workspace_for = Workspaces(root, "shared").for_context
    return FileTools(workspace_for, max_chars=max_chars, confirm_overwrite=confirm_overwrite)


async def test_read_file_alone(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("first\nsecond\nthird\n")
    out = await files(tmp_path).read_file(ReadFileArgs(path="notes.md", offset=2, limit=1), CTX)
    assert out == "     2\tsecond\n[lines 2-2 of 3; use offset=3]"


async def test_read_file_cuts_at_the_family_limit(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("x" * 500)
    out = await files(tmp_path, max_chars=100).read_file(ReadFileArgs(path="wide.txt"), CTX)
    assert out.endswith("\n[... cut: line too long; read fewer lines]")
    assert len(out.split("\n", 1)[0]) == 100


async def test_write_then_edit_alone(tmp_path: Path) -> None:
    tools = files(tmp_path)
    args = WriteFileArgs(path="a/b.txt", content="hello world\n")
    assert await tools.write_file(args, CTX) == "created a/b.txt (12 bytes)"
    edit = EditFileArgs(path="a/b.txt", old_text="world", new_text="there")
    assert await tools.edit_file(edit, CTX) == "edited a/b.txt: replaced 1 occurrence at line 1."
    assert (tmp_path / "a" / "b.txt").read_text() == "hello there\n"


async def test_overwrite_approval_is_the_familys_option(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("precious")
    args = WriteFileArgs(path="kept.txt", content="new")
    assert await files(tmp_path).overwrite_approval(args, CTX) is None
    need = await files(tmp_path, confirm_overwrite=True).overwrite_approval(args, CTX)
    assert need is not None and need.shape == "write_file kept.txt"
    created = WriteFileArgs(path="fresh.txt", content="new")
    assert await files(tmp_path, confirm_overwrite=True).overwrite_approval(created, CTX) is None


async def test_glob_alone(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("")
    (tmp_path / "readme.md").write_text("")
    find = FindTools(Workspaces(tmp_path, "shared").for_context)
    assert await find.glob_files(GlobArgs(pattern="*.py"), CTX) == "src/app.py"


async def test_todo_alone_on_an_embedded_store(embedded_store: Store) -> None:
    todo = TodoTools(embedded_store)
    items = [TodoItem(task="read the logs", status="done"), TodoItem(task="fix it")]
    written = await todo.todo(TodoArgs(items=items), CTX)
    assert written == "Tasks (1/2 done):\n[x] read the logs\n[ ] fix it"
    # A second family on the same store reads the same list: it lives in the store.
    assert await TodoTools(embedded_store).todo(TodoArgs(), CTX) == written


async def test_memory_alone_on_an_embedded_store(embedded_store: Store) -> None:
    book = MemoryBook(embedded_store, MemorySettings())
    memory = MemoryTools(book)
    out = await memory.memory(MemoryArgs(action="add", text="Ana drinks tea"), CTX)
    assert out.startswith("chat memory (") and out.endswith("\n- Ana drinks tea")
    assert await book.entries(MemoryScope.CHAT, CTX.chat, CTX.user) == ["Ana drinks tea"]


async def test_web_search_without_a_provider_says_so() -> None:
    with pytest.raises(ToolError) as refused:
        await WebSearchTools(None).web_search(WebSearchArgs(query="chatgate"), CTX)
    assert str(refused.value) == NOT_CONFIGURED


async def test_cron_without_a_scheduler_says_so() -> None:
    with pytest.raises(ToolError, match="scheduling is not available"):
        await CronTools(None).list_jobs(ListJobsArgs(), CTX)


async def test_skill_alone(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_text("---\nname: tea\ndescription: brew\n---\nBoil.\n")
    skills = SkillTools(SkillLibrary([(tmp_path, "local")]))
    assert await skills.load_skill(SkillArgs(name="tea"), CTX) == "Boil."
    with pytest.raises(ToolError, match="no skill named 'coffee'"):
        await skills.load_skill(SkillArgs(name="coffee"), CTX)


async def test_register_adds_tools_sources_and_extensions(
    embedded_store: Store, tmp_path: Path
) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_text("---\nname: tea\ndescription: brew\n---\nBoil.\n")
    server = {"command": sys.executable, "args": [str(ROOT / "tests" / "fakes" / "mcp_server.py")]}
    settings = Settings(data_dir=tmp_path / "data", mcp=MCPSettings(servers={"notes": server}))
    families: list[ToolFamily] = [
        ClarifyService(embedded_store, Outbox(), EntrySigner(b"k" * 32)),
        SkillTools(SkillLibrary([(tmp_path, "local")])),
        MCPTools(settings),
    ]
    registry, extensions = ToolRegistry(), Extensions()
    register_families(registry, extensions, families)
    try:
        assert registry.names() == ["clarify", "skill"]  # the MCP tools come once it connects
        mcp = families[2]
        assert isinstance(mcp, MCPTools) and registry.sources == (mcp.manager,)
        assert "mcp:notes" in registry.declared_groups()
        assert len(extensions.middlewares("questions")) == 1  # clarify's typed answers
        (section,) = extensions.prompt_sections  # the skills index
        index = section(CTX.chat, CTX.user)
        assert not isinstance(index, str)  # the index is read from the library: awaited
        assert "- tea: brew" in await index
    finally:
        for family in reversed(families):
            await family.close()


async def test_a_family_without_its_dependency_declares_nothing(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, browser={"enabled": False})
    browser = BrowserTools(settings, AddressGuard(), Workspaces(tmp_path, "shared").for_context)
    assert browser.specs() == [] and browser.sources() == ()
    mcp = MCPTools(settings)  # no servers configured
    assert mcp.specs() == [] and mcp.sources() == []
    for family in (browser, mcp):
        await family.start()
        await family.close()
