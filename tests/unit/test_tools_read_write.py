"""read_file / write_file stay inside the workspace and answer clearly (edit, glob and search:
test_tools_files.py)."""

import os
from pathlib import Path
from typing import Any

import pytest

from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError, ToolSpec
from gateway.sessions.key import SessionKey
from tools.files.edit import FileTools
from tools.files.workspaces import Workspaces

CTX = ToolContext(
    session=SessionKey("console", "t"),
    chat=ChatRef(platform="console", chat_id="t"),
    user=UserRef(platform="console", user_id="u"),
)


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, Any]:
    workspace_for = Workspaces(tmp_path / "ws", "shared").for_context
    return {t.name: t for t in FileTools(workspace_for, max_chars=4000).specs()}


async def call(tools: dict[str, Any], name: str, **args: Any) -> str:
    spec: ToolSpec[Any] = tools[name]
    return await spec.handler(spec.args(**args), CTX)


async def test_write_then_read(tools: dict[str, Any], tmp_path: Path) -> None:
    assert "created notes/a.txt" in await call(
        tools, "write_file", path="notes/a.txt", content="one\ntwo\n"
    )
    out = await call(tools, "read_file", path="notes/a.txt")
    assert "1\tone" in out and "2\ttwo" in out
    assert "overwrote" in await call(tools, "write_file", path="notes/a.txt", content="x")
    assert (tmp_path / "ws" / "notes" / "a.txt").read_text() == "x"


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "a/../../x", "~/x"])
async def test_escapes_refused(tools: dict[str, Any], path: str) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(tools, "read_file", path=path)
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(tools, "write_file", path=path, content="pwned")


async def test_symlink_escape_refused(tools: dict[str, Any], tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    os.symlink(secret, tmp_path / "ws" / "link.txt")
    os.symlink(tmp_path, tmp_path / "ws" / "dirlink")
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(tools, "read_file", path="link.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(tools, "write_file", path="dirlink/new.txt", content="x")
    assert not (tmp_path / "new.txt").exists()


async def test_paging_and_missing(tools: dict[str, Any]) -> None:
    await call(
        tools, "write_file", path="big.txt", content="\n".join(f"line {i}" for i in range(1, 1001))
    )
    page = await call(tools, "read_file", path="big.txt", offset=500, limit=10)
    assert "500\tline 500" in page and "509\tline 509" in page and "line 510" not in page
    assert "use offset=510" in page
    with pytest.raises(ToolError, match="does not exist"):
        await call(tools, "read_file", path="nope.txt")


async def test_binary_file(tools: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "ws" / "img.bin").write_bytes(b"\x89PNG\x00\x00\x01" * 100)
    assert "binary file" in await call(tools, "read_file", path="img.bin")
