"""What a command opened among the files people sent, seen by the kernel: real processes
read the workspace with and without naming `attachments/`."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from tools.files import outside_reads as module
from tools.files.outside_reads import outside_reads

WALK = (
    "python3 -c 'import os; "
    '[open(os.path.join(d, f)).read() for d, _, fs in os.walk(".") for f in fs]\''
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "attachments" / "deep").mkdir(parents=True)
    (tmp_path / "attachments" / "deep" / "cv.txt").write_text("Jane Doe")
    (tmp_path / "mine.txt").write_text("my notes")
    return tmp_path


async def run(command: str, cwd: Path) -> str:
    async with outside_reads(cwd) as reads:
        proc = await asyncio.create_subprocess_shell(
            command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        await proc.wait()
    return reads.first


@pytest.mark.parametrize(
    ("command", "read"),
    [
        ("cat mine.txt", ""),
        ("ls", ""),
        ("cat attachments/deep/cv.txt", "attachments/deep/cv.txt"),
        ("grep -r Jane .", "attachments/deep/cv.txt"),
        ("cat *", ""),  # it opens the folder, and reads nothing from it
        ("ls -R", ""),  # names only
        (WALK, "attachments/deep/cv.txt"),
    ],
)
async def test_a_read_counts_whether_or_not_the_command_names_the_folder(
    workspace: Path, command: str, read: str
) -> None:
    assert await run(command, workspace) == read


async def test_without_outside_folders_nothing_is_watched(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("x")
    assert await run("cat *", tmp_path) == ""


async def test_a_symlinked_folder_is_not_followed_into(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "attachments").symlink_to(elsewhere)
    assert await run("ls", ws) == ""


async def test_a_tree_too_large_to_watch_counts_as_read(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "_MAX_DIRECTORIES", 1)
    assert await run("cat mine.txt", workspace) == "attachments"
