"""The sandbox backend for real with bwrap: what a command can and cannot reach. Each test
also shows the thing it forbids is there to be reached, so it can fail."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.fixtures_terminal import SECRETS, run_gateway_like
from tools.shell.terminal.base import Limits, RunResult, run_command
from tools.shell.terminal.env import safe_env
from tools.shell.terminal.sandbox import SandboxBackend

MakeSandbox = Callable[..., SandboxBackend]


async def sh(backend: SandboxBackend, ws: Path, command: str, limit: float = 10) -> RunResult:
    ws.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - a test helper
    return await run_command(
        backend, command, workspace=ws, cwd=ws, env=safe_env(), timeout=limit, max_chars=20000
    )


async def test_cannot_write_outside_the_workspace(
    make_sandbox: MakeSandbox, open_dir: Path
) -> None:
    ws = open_dir / "ws"
    outside = open_dir / "outside.txt"
    result = await sh(
        make_sandbox(ro_paths=[open_dir]),
        ws,
        f"echo inside > inside.txt; for p in /usr/x /etc/x /opt/x {outside}; do "
        'echo x > "$p" 2>/dev/null && echo "WROTE $p"; done; echo t > /tmp/t; cat /tmp/t',
    )
    assert "WROTE" not in result.output and result.output.endswith("t\n")
    assert (ws / "inside.txt").read_text() == "inside\n"
    written = [p for p in (outside, Path("/etc/x"), Path("/usr/x"), Path("/opt/x")) if p.exists()]
    assert written == []
    # /tmp is the sandbox's own, new at every call.
    again = await sh(make_sandbox(), ws, "cat /tmp/t")
    assert "No such file" in again.output


async def test_data_dir_config_and_home_are_hidden(
    make_sandbox: MakeSandbox, open_dir: Path
) -> None:
    """Even where they sit under a path the sandbox mounts (here a read-only extra path)."""
    srv = open_dir / "srv"
    data = srv / "data"
    data.mkdir(parents=True)
    (data / "chatgate.db").write_text("STORE-SECRET")
    config = srv / "chatgate.toml"
    config.write_text('telegram.token = "CONFIG-SECRET"')
    (srv / "public.txt").write_text("PUBLIC")
    backend = make_sandbox(ro_paths=[srv], hide=[data, config, Path.home()])
    ws = open_dir / "ws"
    assert (await sh(backend, ws, f"cat {srv}/public.txt")).output == "PUBLIC"  # mounted ...
    listing = await sh(backend, ws, f"ls -A {data}")
    assert listing.output == "" and listing.exit_code == 0  # ... but the data dir is empty
    out = (await sh(backend, ws, f"cat {data}/chatgate.db {config}")).output
    assert "STORE-SECRET" not in out and "CONFIG-SECRET" not in out
    home = await sh(backend, ws, f"ls -A {Path.home()}")
    assert "No such file" in home.output
    assert "root" not in (await sh(backend, ws, "ls /")).output.split()


def test_gateway_environment_secrets_are_out_of_reach(open_dir: Path) -> None:
    """Issue 22 finding 1: `cat /proc/$PPID/environ` and variants returned the tokens."""
    ws = open_dir / "ws"
    ws.mkdir()
    out = run_gateway_like(
        open_dir,
        "plain",  # the sandbox needs no hardening of the gateway: it cannot see it at all
        "sandbox",
        ws,
        [
            "env",
            "cat /proc/{gw}/environ",
            "cat /proc/$PPID/environ",
            "cat /proc/[0-9]*/environ",
            "ps eww -A",
            "cp -r /proc/{gw} copy",
            "grep -rl telegram /proc/*/environ",
        ],
    )
    assert "/proc/{gw}/environ: No such file" not in out  # {gw} was filled in
    assert "environ: No such file" in out  # another PID namespace: the gateway is not there
    for secret in SECRETS.values():
        assert secret not in out


NEW_USER_NAMESPACES = (
    "unshare -r id -u; echo unshare=$?; unshare -U true; echo again=$?; "
    'python3 -c \'import threading; t = threading.Thread(target=print, args=("threads",)); '
    "t.start(); t.join()'"
)


async def test_no_nested_user_namespaces(make_sandbox: MakeSandbox, open_dir: Path) -> None:
    """Issue 30 (low): `unshare -r` made a user namespace inside the sandbox. As root (a
    privileged bwrap, no user namespace of its own) a seccomp filter refuses it; threads,
    made with clone3, still start."""
    out = (await sh(make_sandbox(), open_dir / "ws", NEW_USER_NAMESPACES)).output
    assert "unshare=1" in out and "again=1" in out and "threads" in out, out
    assert "\n0\n" not in f"\n{out}"  # never root in a namespace of its own


def test_no_nested_user_namespaces_for_a_non_root_gateway(open_dir: Path, run_user: str) -> None:
    """The same with the sandbox of a non-root gateway (bwrap's --disable-userns)."""
    ws = open_dir / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    out = run_gateway_like(open_dir, "harden", "sandbox", ws, [NEW_USER_NAMESPACES], user=run_user)
    assert "unshare=1" in out and "again=1" in out and "threads" in out, out
    assert "\n0\n" not in f"\n{out}"  # never root in a namespace of its own


async def serve_hello() -> tuple[asyncio.Server, int]:
    async def hello(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HELLO-FROM-HOST\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(hello, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.fixture
async def host_service() -> AsyncIterator[int]:
    server, port = await serve_hello()
    async with server:
        yield port


async def test_no_network_not_even_loopback(
    make_sandbox: MakeSandbox, open_dir: Path, host_service: int
) -> None:
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{host_service} && cat <&3"
    closed = await sh(make_sandbox(), open_dir / "ws", probe)
    assert "HELLO-FROM-HOST" not in closed.output and closed.exit_code != 0
    opened = await sh(make_sandbox(network=True), open_dir / "ws", probe)
    assert "HELLO-FROM-HOST" in opened.output  # the service is reachable when allowed


async def test_two_chats_cannot_see_each_other(make_sandbox: MakeSandbox, open_dir: Path) -> None:
    chats = open_dir / "chats"
    alice, bob = chats / "alice", chats / "bob"
    backend = make_sandbox()
    await sh(backend, alice, "echo ALICE-PRIVATE > diary.txt")
    assert (alice / "diary.txt").read_text() == "ALICE-PRIVATE\n"
    read = await sh(backend, bob, f"cat {alice}/diary.txt ../alice/diary.txt")
    assert "ALICE-PRIVATE" not in read.output and read.exit_code != 0
    listed = await sh(backend, bob, f"ls -A {chats}")
    assert listed.output.split() == ["bob"]  # its own workspace is all there is


async def test_process_limit(make_sandbox: MakeSandbox, open_dir: Path) -> None:
    backend = make_sandbox(Limits(cpu_seconds=30, memory_mb=512, max_processes=12))
    fork = (
        "python3 -c 'import os, time\nn = 0\nfor i in range(40):\n"
        "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    n += 1\n"
        'print("forked", n)\''
    )
    out = (await sh(backend, open_dir / "ws", fork)).output
    forked = int(out.split("forked", 1)[1].split()[0])
    assert 0 < forked < 12


async def test_memory_limit(make_sandbox: MakeSandbox, open_dir: Path) -> None:
    backend = make_sandbox(Limits(cpu_seconds=30, memory_mb=64, max_processes=64))
    grab = "python3 -c 'b = bytearray(512 * 1024 * 1024); print(\"GOT IT\")'"
    out = (await sh(backend, open_dir / "ws", grab)).output
    assert "MemoryError" in out and "GOT IT" not in out


async def test_cpu_limit(make_sandbox: MakeSandbox, open_dir: Path) -> None:
    backend = make_sandbox(Limits(cpu_seconds=1, memory_mb=256, max_processes=64))
    result = await sh(backend, open_dir / "ws", "while :; do :; done", limit=20)
    assert not result.timed_out  # ended by the CPU limit, long before the wall timeout
    assert result.exit_code != 0


def test_argv_hides_before_and_after_the_workspace(
    make_sandbox: MakeSandbox, tmp_path: Path
) -> None:
    """A data directory inside the workspace stays hidden; a workspace inside a hidden
    directory stays visible: mounts go parents first."""
    ws = tmp_path / "ws"
    (ws / ".chatgate").mkdir(parents=True)
    argv = make_sandbox(hide=[ws / ".chatgate", tmp_path]).command(["true"], workspace=ws, cwd=ws)
    bind = argv.index("--bind")
    assert argv[bind + 1] == str(ws)
    assert argv.index(str(ws / ".chatgate")) > bind
    assert "--tmpfs" not in argv[bind : argv.index(str(ws / ".chatgate")) - 1]
    # tmp_path is under /tmp, the sandbox's own tmpfs: nothing there to hide.
    assert argv.count(str(tmp_path)) == 1 and argv[argv.index(str(tmp_path)) - 1] == "--dir"


async def test_no_capabilities_in_a_private_chat_folder(
    make_sandbox: MakeSandbox, open_dir: Path
) -> None:
    """Chat folders are 0700; the command enters its own and holds no capability at all."""
    ws = open_dir / "telegram-42"
    ws.mkdir(mode=0o700)
    result = await sh(make_sandbox(), ws, "pwd; grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status")
    lines = result.output.splitlines()
    assert lines[0] == str(ws) and result.exit_code == 0
    caps = dict(line.split(":\t") for line in lines[1:])
    assert {caps["CapPrm"], caps["CapEff"], caps["CapAmb"]} == {"0000000000000000"}
    if os.geteuid() == 0:
        assert caps["CapBnd"] == "0000000000000000"
