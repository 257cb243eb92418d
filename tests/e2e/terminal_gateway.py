"""A gateway-like process for the secret-isolation tests: it holds secrets in its own
environment (as a real gateway does: CHATGATE_* variables), optionally hardens itself like
the gateway does at startup, runs commands on a terminal backend the way the shell tool does,
and prints their output. Standard library plus tools.terminal only, so it can run as another
user from a copy of the package.

    python3 terminal_gateway.py harden|plain local|sandbox WORKSPACE COMMAND...

`plain` is the gateway without its protections: dumpable, and local commands not confined
(no Landlock domain), so a test can show what they prevent.

`{gw}` in a command is replaced by this process's pid.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tools.shell.terminal import make_non_dumpable
from tools.shell.terminal.base import Limits, TerminalBackend, run_command
from tools.shell.terminal.env import safe_env


def backend(kind: str, mode: str) -> TerminalBackend:
    if kind == "sandbox":
        from tools.shell.terminal.sandbox import SandboxBackend

        return SandboxBackend(Limits())
    from tools.shell.terminal.local import LocalBackend

    local = LocalBackend(Limits())
    if mode == "plain":
        local.landlock = 0
    return local


async def main(mode: str, kind: str, workspace: Path, commands: list[str]) -> None:
    if mode == "harden" and not make_non_dumpable():
        sys.exit("could not harden")
    terminal = backend(kind, mode)
    for command in commands:
        result = await run_command(
            terminal,
            command.replace("{gw}", str(os.getpid())),
            workspace=workspace,
            cwd=workspace,
            env=safe_env(),
            timeout=20,
            max_chars=100_000,
        )
        print(result.render(20), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4:]))
