"""A command judged with its targets resolved starts only if they still lead where they
did: the launcher checks the pins at the last moment before the command runs, so a target
swapped for a symbolic link after the check (by another command running meanwhile) is not
followed. Real processes under the launcher."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tools.shell.safety import classify
from tools.shell.terminal.base import MOVED, Limits, moved
from tools.shell.terminal.env import safe_env
from tools.shell.terminal.process import launch


async def finish(command: str, cwd: Path, pins: tuple[tuple[str, str], ...]) -> tuple[str, int]:
    running = await launch(
        ["bash", "-c", command], cwd=cwd, env=safe_env(), limits=Limits(), pins=pins
    )
    out = await asyncio.wait_for(running.stdout.read(), 10)
    for _ in range(250):
        if running.returncode is not None:
            break
        await asyncio.sleep(0.02)
    await running.stop()
    assert running.returncode is not None
    return out.decode(), running.returncode


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "out").mkdir(parents=True)
    (ws / "out" / "junk.txt").write_text("junk")
    (ws / "keep").mkdir()
    (ws / "keep" / "precious.txt").write_text("keep")
    return ws


def test_a_verdict_pins_each_target_to_where_it_leads(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "link").symlink_to("keep")
    verdict = classify("rm -rf out/ link/", cwd=str(ws), resolve_links=True)
    assert verdict.action == "ask"
    assert dict(verdict.pins) == {
        f"{ws}/out/": f"{ws}/out",
        f"{ws}/link/": f"{ws}/keep",
    }
    assert classify("rm -rf out/", cwd=str(ws)).pins == ()  # links not resolved: no pins


async def test_a_target_swapped_for_a_link_after_the_check_is_not_followed(
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path)
    pins = classify("rm -rf out/", cwd=str(ws), resolve_links=True).pins
    (ws / "out" / "junk.txt").unlink()
    (ws / "out").rmdir()
    (ws / "out").symlink_to("keep")
    assert moved(pins).startswith(f"not run: {ws}/out/ leads to {ws}/keep now")
    out, code = await finish("rm -rf out/*", ws, pins)
    assert code == MOVED and out.startswith(f"not run: {ws}/out/ leads to {ws}/keep now")
    assert (ws / "keep" / "precious.txt").exists()


async def test_unmoved_pins_let_the_command_run(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    pins = classify("rm -rf out/", cwd=str(ws), resolve_links=True).pins
    assert moved(pins) == ""
    out, code = await finish("rm -rf out/", ws, pins)
    assert (out, code) == ("", 0)
    assert not (ws / "out").exists() and (ws / "keep" / "precious.txt").exists()
