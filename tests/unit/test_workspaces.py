"""A workspace per conversation (issue 15): two chats cannot see each other's files, folder
names come from escaped ids, and wiping a chat's folder follows no link."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ToolsSettings
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError
from gateway.sessions.key import SessionKey
from tools.files.edit import FileTools
from tools.files.find import FindTools
from tools.files.workspaces import Scope, Usage, Workspaces


def ctx(chat_id: str, user_id: str = "u1", thread: str | None = None) -> ToolContext:
    chat = ChatRef(platform="telegram", chat_id=chat_id, thread_id=thread)
    return ToolContext(
        session=SessionKey("telegram", chat_id, thread),
        chat=chat,
        user=UserRef(platform="telegram", user_id=user_id),
    )


def build(root: Path, scope: Scope) -> dict[str, Any]:
    workspace_for = Workspaces(root, scope).for_context
    specs = [*FileTools(workspace_for).specs(), *FindTools(workspace_for).specs()]
    return {t.name: t for t in specs}


async def call(tools: dict[str, Any], where: ToolContext, name: str, **args: Any) -> str:
    spec = tools[name]
    result: str = await spec.handler(spec.args(**args), where)
    return result


def test_the_default_scope_is_chat() -> None:
    assert ToolsSettings().workspace_scope == "chat"


async def test_two_chats_cannot_see_each_others_files(tmp_path: Path) -> None:
    tools = build(tmp_path / "ws", "chat")
    alice, bob = ctx("-100111"), ctx("-100222")
    await call(tools, alice, "write_file", path="plan.md", content="secret plan")
    assert (tmp_path / "ws" / "telegram--100111" / "plan.md").read_text() == "secret plan"

    with pytest.raises(ToolError, match="does not exist"):
        await call(tools, bob, "read_file", path="plan.md")
    assert "no files match" in await call(tools, bob, "glob", pattern="*")
    assert "no matches" in await call(tools, bob, "search", pattern="secret")
    for path in (
        "../telegram--100111/plan.md",
        str(tmp_path / "ws" / "telegram--100111" / "plan.md"),
    ):
        with pytest.raises(ToolError, match="outside the workspace"):
            await call(tools, bob, "read_file", path=path)
        with pytest.raises(ToolError, match="outside the workspace"):
            await call(tools, bob, "write_file", path=path, content="x")
    assert await call(tools, alice, "glob", pattern="*") == "plan.md"


async def test_threads_share_the_chat_and_sub_agents_their_parents(tmp_path: Path) -> None:
    tools = build(tmp_path / "ws", "chat")
    await call(tools, ctx("42", thread="7"), "write_file", path="a.txt", content="from a thread")
    sub_agent = dataclasses.replace(ctx("42", user_id="someone-else"), is_subagent=True)
    assert "from a thread" in await call(tools, sub_agent, "read_file", path="a.txt")


async def test_the_user_scope_separates_people_in_one_chat(tmp_path: Path) -> None:
    tools = build(tmp_path / "ws", "user")
    await call(tools, ctx("42", "ana"), "write_file", path="mine.txt", content="ana's")
    with pytest.raises(ToolError, match="does not exist"):
        await call(tools, ctx("42", "bo"), "read_file", path="mine.txt")
    with pytest.raises(ToolError, match="does not exist"):
        await call(tools, ctx("43", "ana"), "read_file", path="mine.txt")  # per chat, too
    assert (tmp_path / "ws" / "telegram-42" / "u-ana" / "mine.txt").read_text() == "ana's"


async def test_the_shared_scope_is_the_root_itself(tmp_path: Path) -> None:
    tools = build(tmp_path / "ws", "shared")
    await call(tools, ctx("1"), "write_file", path="team.txt", content="all")
    assert "all" in await call(tools, ctx("2"), "read_file", path="team.txt")
    assert (tmp_path / "ws" / "team.txt").exists()


def test_folders_are_private_and_named_from_escaped_ids(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path / "ws", "user")
    ws = workspaces.for_context(ctx("C01AB", "U9"))
    assert ws.root == (tmp_path / "ws" / "telegram-C01AB" / "u-U9").resolve()
    for path in (ws.root, ws.root.parent):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    names = {
        workspaces.folder(ChatRef(platform="telegram", chat_id=chat_id))[0]
        for chat_id in ("..", "../x", "a/b", "a_2fb", "", ".", "x" * 500, "x" * 501, "ä")
    }
    assert len(names) == 9  # no two ids share a folder
    assert all("/" not in n and "." not in n and len(n) <= 130 for n in names)
    assert workspaces.folder(ChatRef(platform="telegram", chat_id="a/b")) == ("telegram-a_2fb",)
    # The same chat always gets the same folder.
    assert workspaces.for_context(ctx("C01AB", "U9")).root == ws.root


def test_a_link_in_place_of_a_chat_folder_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "ws" / "telegram-42")
    with pytest.raises(ToolError, match="not a plain directory"):
        Workspaces(tmp_path / "ws", "chat").for_context(ctx("42"))


def test_wipe_deletes_one_chats_folder_and_follows_no_link(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path / "ws", "chat")
    chat, other = ChatRef(platform="telegram", chat_id="42"), ChatRef(platform="slack", chat_id="C")
    mine = workspaces.for_chat(chat, UserRef(platform="telegram", user_id="1"))
    theirs = workspaces.for_chat(other, UserRef(platform="slack", user_id="U"))
    mine.write_bytes("notes/a.txt", b"12345")
    mine.write_bytes("b.txt", b"x")
    theirs.write_bytes("keep.txt", b"keep")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("precious")
    os.symlink(outside, mine.root / "link-out")

    assert workspaces.usage(chat) == Usage(files=3, bytes=6)
    assert workspaces.wipe(chat) == Usage(files=3, bytes=6)
    assert not mine.root.exists()
    assert (outside / "precious.txt").read_text() == "precious"
    assert (theirs.root / "keep.txt").read_bytes() == b"keep"
    assert workspaces.wipe(chat) == Usage(0, 0)  # nothing left: nothing to do
    assert workspaces.usage(chat) == Usage(0, 0)
    # Used again after a wipe, the folder comes back empty.
    assert workspaces.for_chat(chat, UserRef(platform="telegram", user_id="1")).listdir(".") == []
    # A link put in the folder's place is removed alone.
    workspaces.wipe(chat)
    os.symlink(outside, tmp_path / "ws" / "telegram-42")
    assert workspaces.wipe(chat) == Usage(1, 0)
    assert (outside / "precious.txt").read_text() == "precious"


def test_wipe_in_the_user_scope_and_never_in_shared(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path / "ws", "user")
    chat = ChatRef(platform="discord", chat_id="9")
    ana, bo = UserRef(platform="discord", user_id="ana"), UserRef(platform="discord", user_id="bo")
    workspaces.for_chat(chat, ana).write_bytes("a.txt", b"a")
    workspaces.for_chat(chat, bo).write_bytes("b.txt", b"b")
    assert workspaces.wipe(chat, ana) == Usage(1, 1)
    assert workspaces.usage(chat) == Usage(1, 1)  # bo's file is left
    assert workspaces.wipe(chat) == Usage(1, 1)
    assert not (tmp_path / "ws" / "discord-9").exists()

    shared = Workspaces(tmp_path / "ws", "shared")
    assert not shared.per_conversation
    with pytest.raises(ValueError, match="never wiped"):
        shared.wipe(chat)


async def test_the_file_tools_never_write_past_the_quota(tmp_path: Path) -> None:
    workspace_for = Workspaces(tmp_path, "chat", quota_bytes=1000).for_context
    tools = {t.name: t for t in FileTools(workspace_for).specs()}
    a, b = ctx("a"), ctx("b")
    await call(tools, a, "write_file", path="big.txt", content="x" * 900)
    with pytest.raises(ToolError, match="past its quota"):
        await call(tools, a, "write_file", path="more.txt", content="y" * 200)
    assert not (tmp_path / "telegram-a" / "more.txt").exists()  # nothing half-written
    # Replacing a file counts its new size, not both; an edit that grows it past is refused.
    await call(tools, a, "write_file", path="big.txt", content="z" * 949 + "!")
    with pytest.raises(ToolError, match="past its quota"):
        await call(tools, a, "edit_file", path="big.txt", old_text="!", new_text="!" * 100)
    assert (tmp_path / "telegram-a" / "big.txt").read_text() == "z" * 949 + "!"
    # The quota is each conversation's own.
    await call(tools, b, "write_file", path="b.txt", content="w" * 900)
    assert Workspaces(tmp_path, "chat").usage(b.chat).bytes == 900


def test_a_full_workspace_says_so(tmp_path: Path) -> None:
    space = Workspaces(tmp_path, "chat", quota_bytes=10).for_chat(ctx("a").chat, ctx("a").user)
    assert space.over_quota() is None
    (space.root / "f").write_bytes(b"0123456789")
    assert "at or past its quota of 10 bytes" in (space.over_quota() or "")
    assert Workspaces(tmp_path, "chat").for_chat(ctx("a").chat, ctx("a").user).over_quota() is None
