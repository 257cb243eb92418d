"""edit_file, glob and search: exact edits with helpful misses, workspace-scoped finding."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError, ToolSpec
from gateway.sessions.key import SessionKey
from tools.files import find
from tools.files.edit import FileTools
from tools.files.find import FindTools, glob_regex
from tools.files.workspaces import Workspaces

CTX = ToolContext(
    session=SessionKey("console", "t"),
    chat=ChatRef(platform="console", chat_id="t"),
    user=UserRef(platform="console", user_id="u"),
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def tools(ws: Path) -> dict[str, ToolSpec[Any]]:
    workspace_for = Workspaces(ws, "shared").for_context
    specs = [*FileTools(workspace_for, max_chars=4000).specs(), *FindTools(workspace_for).specs()]
    return {t.name: t for t in specs}


async def call(tools: dict[str, ToolSpec[Any]], name: str, **args: Any) -> str:
    spec = tools[name]
    return await spec.handler(spec.args(**args), CTX)


# -- edit_file -------------------------------------------------------------------------------


async def test_edit_replaces_a_unique_match(tools: dict[str, Any], ws: Path) -> None:
    (ws / "a.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    out = await call(tools, "edit_file", path="a.py", old_text="return 2", new_text="return 3")
    assert out == "edited a.py: replaced 1 occurrence at line 5."
    assert (ws / "a.py").read_text().endswith("return 3\n")


async def test_edit_refuses_an_ambiguous_match(tools: dict[str, Any], ws: Path) -> None:
    (ws / "a.txt").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(ToolError, match=r"appears 2 times in a.txt \(lines 1, 3\).*replace_all"):
        await call(tools, "edit_file", path="a.txt", old_text="x = 1", new_text="x = 9")
    assert (ws / "a.txt").read_text() == "x = 1\ny = 2\nx = 1\n"
    out = await call(
        tools, "edit_file", path="a.txt", old_text="x = 1", new_text="x = 9", replace_all=True
    )
    assert "replaced 2 occurrences" in out
    assert (ws / "a.txt").read_text() == "x = 9\ny = 2\nx = 9\n"


async def test_edit_miss_shows_the_nearest_lines(tools: dict[str, Any], ws: Path) -> None:
    lines = [f"line number {i}" for i in range(1, 40)]
    lines[19] = "    total = price * quantity"
    (ws / "calc.py").write_text("\n".join(lines) + "\n")
    with pytest.raises(ToolError) as err:
        await call(
            tools, "edit_file", path="calc.py", old_text="total = price * qty", new_text="total = 0"
        )
    message = str(err.value)
    assert "not found in calc.py" in message
    assert "    20\t    total = price * quantity" in message
    assert "line number 30" not in message


async def test_edit_miss_on_whitespace_says_so(tools: dict[str, Any], ws: Path) -> None:
    (ws / "a.py").write_text("if x:\n\treturn 1\n")
    with pytest.raises(ToolError, match="matches if spaces are ignored"):
        await call(tools, "edit_file", path="a.py", old_text="if x:\n    return 1", new_text="pass")


async def test_edit_miss_with_nothing_similar(tools: dict[str, Any], ws: Path) -> None:
    (ws / "a.txt").write_text("alpha\nbeta\n")
    with pytest.raises(ToolError, match="no line is similar"):
        await call(tools, "edit_file", path="a.txt", old_text="zzzzqqqq", new_text="x")


async def test_edit_keeps_crlf_line_endings(tools: dict[str, Any], ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call(tools, "edit_file", path="win.txt", old_text="one\ntwo", new_text="1\n2")
    assert (ws / "win.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


@pytest.mark.parametrize("path", ["../x.txt", "/etc/hosts", "sub/../../x.txt"])
async def test_edit_outside_the_workspace_is_refused(tools: dict[str, Any], path: str) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(tools, "edit_file", path=path, old_text="a", new_text="b")


async def test_edit_through_a_symlink_out_is_refused(
    tools: dict[str, Any], ws: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("token=abc\n")
    os.symlink(secret, ws / "link.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(tools, "edit_file", path="link.txt", old_text="abc", new_text="pwned")
    assert secret.read_text() == "token=abc\n"


async def test_edit_refuses_binary_huge_empty_and_missing(
    tools: dict[str, Any], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "bin.dat").write_bytes(b"\x00\x01abc")
    with pytest.raises(ToolError, match="binary file"):
        await call(tools, "edit_file", path="bin.dat", old_text="abc", new_text="x")
    monkeypatch.setattr("tools.files.edit.MAX_EDIT_BYTES", 100)
    (ws / "big.txt").write_text("a" * 1000)
    with pytest.raises(ToolError, match="too large to edit"):
        await call(tools, "edit_file", path="big.txt", old_text="a", new_text="b")
    with pytest.raises(ToolError, match="old_text is empty"):
        await call(tools, "edit_file", path="bin.dat", old_text="", new_text="x")
    with pytest.raises(ToolError, match="does not exist"):
        await call(tools, "edit_file", path="nope.txt", old_text="a", new_text="b")


# -- read_file on large files ------------------------------------------------------------------


async def test_read_huge_single_line_is_cut(tools: dict[str, Any], ws: Path) -> None:
    (ws / "min.js").write_text("x" * 50_000)
    out = await call(tools, "read_file", path="min.js")
    assert len(out) < 4200 and "cut: line too long" in out


# -- glob --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/deep/a.py", True),  # no '/': any depth
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/deep/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("test_?.py", "test_1.py", True),
        ("test_?.py", "test_12.py", False),
        ("[!a]*.md", "b.md", True),
        ("[!a]*.md", "a.md", False),
        ("docs/**", "docs/x/y.txt", True),
    ],
)
def test_glob_patterns(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is matches


async def test_glob_lists_files_sorted_and_skips_bulk(tools: dict[str, Any], ws: Path) -> None:
    for rel in ["b.py", "a.py", "src/c.py", "src/readme.md", ".git/hook.py", "node_modules/m.py"]:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("x")
    assert (await call(tools, "glob", pattern="*.py")).splitlines() == ["a.py", "b.py", "src/c.py"]
    assert await call(tools, "glob", pattern="*.py", path="src") == "src/c.py"
    assert "no files match" in await call(tools, "glob", pattern="*.rs")


async def test_glob_is_capped(
    tools: dict[str, Any], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(find, "MAX_GLOB_RESULTS", 5)
    for i in range(20):
        (ws / f"f{i:02}.txt").write_text("x")
    out = (await call(tools, "glob", pattern="*.txt")).splitlines()
    assert out[:5] == [f"f{i:02}.txt" for i in range(5)]
    assert "first 5 shown" in out[-1]


async def test_glob_never_follows_symlinks_out(
    tools: dict[str, Any], ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("x")
    os.symlink(outside, ws / "escape")  # a directory link out
    os.symlink(outside / "secret.py", ws / "leak.py")  # a file link out
    (ws / "real.py").write_text("x")
    os.symlink(ws / "real.py", ws / "alias.py")  # a file link that stays inside
    assert (await call(tools, "glob", pattern="*.py")).splitlines() == ["alias.py", "real.py"]
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(tools, "glob", pattern="*", path="escape")
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(tools, "glob", pattern="*", path="..")


# -- search ------------------------------------------------------------------------------------


@pytest.fixture
def tree(ws: Path) -> Path:
    (ws / "notes").mkdir()
    (ws / "notes" / "a.md").write_text("# Title\nTODO: buy milk\nnothing here\n")
    (ws / "notes" / "b.txt").write_text("todo: call Ana\n")
    (ws / "code.py").write_text("x = re.compile('a+b')\n# TODO(bo): fix\n")
    (ws / "image.png").write_bytes(b"\x89PNG\x00\x00TODO inside binary")
    return ws


async def test_search_regex_and_results(tools: dict[str, Any], tree: Path) -> None:
    out = await call(tools, "search", pattern=r"TODO\b")
    assert out.splitlines() == ["code.py:2: # TODO(bo): fix", "notes/a.md:2: TODO: buy milk"]


async def test_search_options(tools: dict[str, Any], tree: Path) -> None:
    out = await call(tools, "search", pattern="todo", ignore_case=True, glob="*.txt")
    assert out == "notes/b.txt:1: todo: call Ana"
    out = await call(tools, "search", pattern="a+b", fixed=True)
    assert out == "code.py:1: x = re.compile('a+b')"
    assert await call(tools, "search", pattern="milk", path="notes/a.md") == (
        "notes/a.md:2: TODO: buy milk"
    )
    assert "no matches" in await call(tools, "search", pattern="zebra")


async def test_search_skips_binary_files(tools: dict[str, Any], tree: Path) -> None:
    assert "image.png" not in await call(tools, "search", pattern="inside binary")


async def test_search_caps_results_and_line_length(tools: dict[str, Any], ws: Path) -> None:
    (ws / "many.txt").write_text("".join(f"hit {i}\n" for i in range(50)))
    (ws / "long.txt").write_text("needle " + "y" * 2000 + "\n")
    out = (await call(tools, "search", pattern="hit", max_results=10)).splitlines()
    assert len(out) == 11 and "first 10 matches shown" in out[-1]
    long_line = await call(tools, "search", pattern="needle")
    assert long_line.endswith(" […]") and len(long_line) < 400


async def test_search_bad_regex_is_a_clear_error(tools: dict[str, Any], tree: Path) -> None:
    with pytest.raises(ToolError, match=r"not a valid regular expression.*fixed=true"):
        await call(tools, "search", pattern="(unclosed")


async def test_search_stays_in_the_workspace(
    tools: dict[str, Any], ws: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("password=hunter2\n")
    os.symlink(tmp_path, ws / "up")
    os.symlink(tmp_path / "secret.txt", ws / "s.txt")
    assert "no matches" in await call(tools, "search", pattern="hunter2")
    for path in ["..", "up", "s.txt", "/tmp"]:
        with pytest.raises(ToolError, match="outside the workspace"):
            await call(tools, "search", pattern="hunter2", path=path)
