"""The file tools cannot be led out of the workspace by hard links, symlinks on the last
component or a directory swapped for a symlink while they work (issue 22, finding 11); run
with the openat2 fast path and with the component-by-component walk alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, get_args

import pytest

from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError
from gateway.sessions.key import SessionKey
from tools.files import beneath
from tools.files import workspace as workspace_module
from tools.files.edit import FileTools
from tools.files.find import FindTools
from tools.files.workspace import Workspace
from tools.files.workspaces import Workspaces

CTX = ToolContext(
    session=SessionKey("console", "t"),
    chat=ChatRef(platform="console", chat_id="t"),
    user=UserRef(platform="console", user_id="u"),
)


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr(beneath, "USE_OPENAT2", False)
    elif not beneath.USE_OPENAT2:
        pytest.skip("this kernel has no openat2; the walk is tested on its own")
    return str(request.param)


@pytest.fixture
def ws(tmp_path: Path, resolution: str) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def tools(ws: Path) -> dict[str, Any]:
    workspace_for = Workspaces(ws, "shared").for_context
    specs = [*FileTools(workspace_for).specs(), *FindTools(workspace_for).specs()]
    return {t.name: t for t in specs}


async def call(tools: dict[str, Any], name: str, **args: Any) -> str:
    spec = tools[name]
    result: str = await spec.handler(spec.args(**args), CTX)
    return result


@pytest.fixture
def secret(tmp_path: Path, ws: Path) -> Path:
    """A file outside the workspace with a hard link to it inside, as `ln` in a shell makes."""
    outside = tmp_path / "secret.txt"
    outside.write_text("token=abc\n")
    os.link(outside, ws / "h.txt")
    return outside


# -- hard links ----------------------------------------------------------------------------------


async def test_a_hard_link_to_a_file_outside_cannot_be_read(
    tools: dict[str, Any], secret: Path
) -> None:
    with pytest.raises(ToolError, match="has 2 hard links, and hard-linked files are refused"):
        await call(tools, "read_file", path="h.txt")


async def test_a_hard_link_to_a_file_outside_cannot_be_edited_or_overwritten(
    tools: dict[str, Any], secret: Path
) -> None:
    with pytest.raises(ToolError, match="hard-linked files are refused"):
        await call(tools, "edit_file", path="h.txt", old_text="abc", new_text="pwned")
    with pytest.raises(ToolError, match="hard-linked files are refused"):
        await call(tools, "write_file", path="h.txt", content="pwned")
    assert (secret.parent / "secret.txt").read_text() == "token=abc\n"  # not even truncated


async def test_search_never_reads_a_hard_linked_file(tools: dict[str, Any], secret: Path) -> None:
    assert "no matches" in await call(tools, "search", pattern="token")
    with pytest.raises(ToolError, match="hard-linked files are refused"):
        await call(tools, "search", pattern="token", path="h.txt")


# -- symlinks ------------------------------------------------------------------------------------


async def test_write_refuses_a_symlink_on_the_last_component(
    tools: dict[str, Any], ws: Path, tmp_path: Path
) -> None:
    (ws / "real.txt").write_text("keep")
    os.symlink(ws / "real.txt", ws / "alias.txt")  # inside, and still refused for writing
    os.symlink(tmp_path / "new.txt", ws / "dangling.txt")  # would create a file outside
    for path in ("alias.txt", "dangling.txt"):
        with pytest.raises(ToolError, match="is a symbolic link, and writing through links"):
            await call(tools, "write_file", path=path, content="x")
    assert (ws / "real.txt").read_text() == "keep"
    assert not (tmp_path / "new.txt").exists()


async def test_links_that_stay_inside_are_followed_for_reading_and_editing(
    tools: dict[str, Any], ws: Path
) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "real.txt").write_text("one\n")
    os.symlink("sub/real.txt", ws / "rel.txt")
    os.symlink(ws / "sub", ws / "abs-dir")
    assert "1\tone" in await call(tools, "read_file", path="rel.txt")
    out = await call(tools, "edit_file", path="abs-dir/real.txt", old_text="one", new_text="two")
    assert out == "edited sub/real.txt: replaced 1 occurrence at line 1."
    assert await call(tools, "write_file", path="abs-dir/new.txt", content="n") == (
        "created sub/new.txt (1 bytes)"
    )
    assert (ws / "sub" / "new.txt").read_text() == "n"


async def test_link_tricks_are_refused_clearly(
    tools: dict[str, Any], ws: Path, tmp_path: Path
) -> None:
    os.symlink("loop-b", ws / "loop-a")
    os.symlink("loop-a", ws / "loop-b")
    with pytest.raises(ToolError, match="too many symbolic links"):
        await call(tools, "read_file", path="loop-a")
    os.symlink("../..", ws / "up")  # relative, climbing out through a link
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(tools, "write_file", path="up/x.txt", content="x")
    (ws / "file.txt").write_text("x")
    with pytest.raises(ToolError, match="a part of that path is a file"):
        await call(tools, "write_file", path="file.txt/x.txt", content="x")
    assert not (tmp_path / "x.txt").exists()


async def test_a_fifo_is_refused_without_hanging(tools: dict[str, Any], ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        await call(tools, "read_file", path="pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        await call(tools, "write_file", path="pipe", content="x")


def test_directory_operations(ws: Path, tmp_path: Path) -> None:
    workspace = Workspace(ws)
    with workspace.open_dir("a/b/c", create=True) as (_, rel):
        assert rel == "a/b/c"
    assert (ws / "a" / "b" / "c").is_dir()
    assert workspace.write_bytes(str(ws / "a" / "f.txt"), b"x") == ("a/f.txt", True)
    assert workspace.listdir("a") == ["b/", "f.txt"]
    assert workspace.stat("a/b/../f.txt")[0] == "a/f.txt"
    os.symlink(tmp_path, ws / "out")
    with pytest.raises(ToolError, match="outside the workspace"):
        workspace.listdir("out")


# -- a directory swapped for a symlink while the tools work ---------------------------------------

# Swaps two names atomically (renameat2 RENAME_EXCHANGE), as fast as it can, in its own process.
SWAPPER = textwrap.dedent(
    """
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    a, b, stop = (p.encode() for p in sys.argv[1:4])
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        print("unsupported", ctypes.get_errno(), flush=True)
        sys.exit(0)
    print("ready", flush=True)
    swaps = 1
    while True:
        libc.renameat2(-100, a, -100, b, 2)
        swaps += 1
        if swaps % 256 == 0 and os.path.exists(stop):
            break
    print(swaps, flush=True)
    """
)


class Swapper:
    """Keeps `ws/d` changing between a real directory and a symlink to `outside` until
    stopped; `real` is the directory afterwards."""

    def __init__(self, ws: Path, tmp_path: Path) -> None:
        self.ws, self.outside, self._stop = ws, tmp_path / "outside", tmp_path / "stop"
        self.outside.mkdir()
        (ws / "d").mkdir()
        os.symlink(self.outside, ws / "d_swap")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SWAPPER, str(ws / "d"), str(ws / "d_swap"), str(self._stop)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.swaps = 0

    def start(self) -> None:
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if first.startswith("unsupported"):
            self.proc.wait()
            pytest.skip(f"renameat2(RENAME_EXCHANGE) is not supported here ({first.strip()})")
        assert first == "ready\n"

    def stop(self) -> None:
        if self.proc.returncode is None:
            self._stop.touch()
            self.swaps = int(self.proc.communicate(timeout=30)[0])

    @property
    def real(self) -> Path:
        return self.ws / ("d_swap" if (self.ws / "d").is_symlink() else "d")


@pytest.fixture
def swapper(ws: Path, tmp_path: Path) -> Iterator[Swapper]:
    swapper = Swapper(ws, tmp_path)
    try:
        swapper.start()
        yield swapper
    finally:
        swapper.stop()


async def test_writes_never_land_outside_while_a_directory_is_swapped(
    tools: dict[str, Any], swapper: Swapper
) -> None:
    written = 0
    for i in range(1000):
        try:
            await call(tools, "write_file", path=f"d/f{i}.txt", content="x")
            written += 1
        except ToolError as refused:
            assert "outside the workspace" in str(refused) or "kept changing" in str(refused)
    swapper.stop()
    assert swapper.swaps > 1  # it really swapped while the tool ran
    assert sorted(swapper.outside.iterdir()) == []
    assert len(list(swapper.real.iterdir())) == written


async def test_reads_never_see_outside_while_a_directory_is_swapped(
    tools: dict[str, Any], ws: Path, tmp_path: Path
) -> None:
    swapper = Swapper(ws, tmp_path)
    (swapper.outside / "f.txt").write_text("outside secret\n")
    (ws / "d" / "f.txt").write_text("inside\n")
    try:
        swapper.start()
        for _ in range(1000):
            try:
                out = await call(tools, "read_file", path="d/f.txt")
            except ToolError as refused:
                assert "outside the workspace" in str(refused) or "kept changing" in str(refused)
                continue
            assert "inside" in out and "secret" not in out
    finally:
        swapper.stop()
    assert swapper.swaps > 1


def test_lost_races_are_retried_apart_from_the_symlink_limit(tmp_path: Path) -> None:
    """A name that is a directory again by the time its link is read (a rename lost the race)
    is looked at again without counting as a symlink; only MAX_RETRIES such races in one
    resolution refuse the path, and then as changing, not as a loop."""
    (tmp_path / "d").mkdir()
    base_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with beneath.Cursor(base_fd, PurePosixPath(tmp_path), ["d"]) as cursor:
            assert cursor.to_last() == "d"
            for _ in range(beneath.MAX_RETRIES):
                cursor.follow("d")  # "d" is no symlink: each call is one lost race
            with pytest.raises(beneath.Refused) as refused:
                cursor.follow("d")
        assert refused.value.reason == "changing"
    finally:
        os.close(base_fd)


def test_every_refusal_reason_has_a_message() -> None:
    assert set(get_args(beneath.Reason)) == set(workspace_module._MESSAGES)


def test_a_full_disk_is_a_tool_error(tmp_path: Path) -> None:
    """A write that fails inside the open file (ENOSPC: the open fd is made /dev/full's)
    is a tool error, not an OSError out of the tool (issue 30, finding 13)."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    workspace = Workspace(tmp_path)
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        with (
            pytest.raises(ToolError, match="the disk or the workspace's quota is full"),
            workspace.open_file("notes.md", "write") as file,
        ):
            os.dup2(full, file.fd)
            os.write(file.fd, b"x" * 10)
    finally:
        os.close(full)


def test_a_symlink_loop_is_a_tool_error_for_resolve(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(ToolError, match="too many symbolic links"):
        workspace.resolve("loop")
