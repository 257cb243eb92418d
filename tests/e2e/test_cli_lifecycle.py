"""Every `chatgate` path closes what it opened: the real command in a subprocess, with
ResourceWarnings made errors, then a count of what the process still holds open."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gateway.store.embedded import EmbeddedStore
from tests.e2e.test_cli import _env
from tests.fakes.llm import ScriptedLLM
from tests.fakes.telegram import FakeBotAPI

pytestmark = pytest.mark.e2e

# Runs the command, collects garbage (an unclosed client warns as it is collected), then
# names every socket and every file of the data directory the process still holds that
# it did not hold before the command ran.
_DRIVER = """
import gc, json, os, sys


def held(data):
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used
            continue
        if target.startswith("socket:") or target.startswith(data):
            found.add(f"{fd} {target}")
    return found


data = os.path.realpath(sys.argv[1])
inherited = held(data)  # the test runner's event loop may pass some down
from gateway.app.cli import main

code = main(sys.argv[2:])
gc.collect()
print("held:", json.dumps(sorted(held(data) - inherited)), file=sys.stderr)
sys.exit(code)
"""


async def chatgate_checked(
    env: dict[str, str], *args: str, cwd: Path, python: str = sys.executable
) -> tuple[int, str, list[str]]:
    """Exit code, stderr without the last line, and what the process held open at the end."""
    proc = await asyncio.create_subprocess_exec(
        *(python, "-X", "dev", "-W", "error::ResourceWarning", "-c", _DRIVER),
        env["CHATGATE_DATA_DIR"],
        *args,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,  # `chat` ends at once, as on Ctrl-D
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, raw = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    *lines, last = raw.decode().rstrip("\n").split("\n")
    assert last.startswith("held: "), raw.decode()
    return proc.returncode, "\n".join(lines), json.loads(last.removeprefix("held: "))


@pytest.fixture(scope="module")
def python_without_discord(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python environment with every package of this one except discord.py: a real
    install where a configured platform's SDK is missing."""
    where = tmp_path_factory.mktemp("no-discord")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = Path(sysconfig.get_paths()["purelib"])
    [target] = where.glob("lib/python*/site-packages")
    for entry in site.iterdir():
        # discord.py out, and chatgate's own editable install: PYTHONPATH gives this tree.
        if not entry.name.startswith(("discord", "__editable__")):
            (target / entry.name).symlink_to(entry)
    return str(where / "bin" / "python")


def _repo_env(tmp_path: Path, llm_url: str, **extra: str) -> dict[str, str]:
    env = _env(tmp_path, llm_url, **extra)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


async def test_run_that_fails_to_start_closes_everything_it_opened(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    """Telegram starts (polling, a connection to its API open), then the HTTP port is taken:
    the start fails, and everything opened until then is closed."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = _repo_env(
            tmp_path,
            llm.url,
            CHATGATE_TELEGRAM__TOKEN=tg.token,
            CHATGATE_TELEGRAM__API_URL=tg.url,
            CHATGATE_HTTP__ENABLED="true",
            CHATGATE_HTTP__HOST="127.0.0.1",
            CHATGATE_HTTP__PORT=str(taken.getsockname()[1]),
        )
        code, err, held = await chatgate_checked(env, "run", cwd=tmp_path)
    assert code == 1, err
    assert "chatgate: could not start:" in err
    assert "ResourceWarning" not in err and "Unclosed" not in err, err
    assert held == []
    assert tg.calls_of("getMe")  # Telegram had started


async def test_run_whose_platform_refuses_the_token_closes_everything(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    env = _repo_env(
        tmp_path,
        llm.url,
        CHATGATE_TELEGRAM__TOKEN="123:not-the-token",
        CHATGATE_TELEGRAM__API_URL=tg.url,
        CHATGATE_HTTP__ENABLED="false",
    )
    code, err, held = await chatgate_checked(env, "run", cwd=tmp_path)
    assert code == 1, err
    assert "ResourceWarning" not in err and "Unclosed" not in err, err
    assert held == []


async def test_run_with_a_platform_sdk_missing_closes_everything(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, python_without_discord: str
) -> None:
    """Telegram's adapter is built, then Discord's SDK is found missing: `run` says how to
    install it and leaves nothing open."""
    env = _repo_env(
        tmp_path,
        llm.url,
        CHATGATE_TELEGRAM__TOKEN=tg.token,
        CHATGATE_TELEGRAM__API_URL=tg.url,
        CHATGATE_DISCORD__TOKEN="discord-token",
    )
    code, err, held = await chatgate_checked(
        env, "run", cwd=tmp_path, python=python_without_discord
    )
    assert code == 2, err
    assert "Discord is configured but its library (discord) is not installed" in err
    assert "ResourceWarning" not in err and "Unclosed" not in err, err
    assert held == []
    assert tg.calls == []  # nothing was started


async def test_ask_on_a_store_another_process_holds_closes_everything(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    env = _repo_env(tmp_path, llm.url)
    holder = EmbeddedStore(Path(env["CHATGATE_DATA_DIR"]))
    try:
        code, err, held = await chatgate_checked(env, "ask", "hello", cwd=tmp_path)
    finally:
        await holder.close()
    assert code == 1, err
    assert "already in use by another chatgate process" in err
    assert "ResourceWarning" not in err and "Unclosed" not in err, err
    assert held == []
    assert llm.requests == []


async def test_a_finished_ask_leaves_nothing_open(tmp_path: Path, llm: ScriptedLLM) -> None:
    code, err, held = await chatgate_checked(
        _repo_env(tmp_path, llm.url), "ask", "hello", cwd=tmp_path
    )
    assert code == 0, err
    assert "ResourceWarning" not in err and "Unclosed" not in err, err
    assert held == []
    assert len(llm.requests) == 1


async def test_a_chat_ended_by_ctrl_d_leaves_nothing_open(tmp_path: Path, llm: ScriptedLLM) -> None:
    code, err, held = await chatgate_checked(_repo_env(tmp_path, llm.url), "chat", cwd=tmp_path)
    assert code == 0, err
    assert "ResourceWarning" not in err and "Unclosed" not in err, err
    assert held == []


async def test_doctor_leaves_nothing_open(tmp_path: Path, llm: ScriptedLLM) -> None:
    code, err, held = await chatgate_checked(_repo_env(tmp_path, llm.url), "doctor", cwd=tmp_path)
    assert "ResourceWarning" not in err and "Unclosed" not in err, err
    assert held == [], os.linesep.join(held)
    assert code in (0, 1)
