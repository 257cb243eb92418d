"""A gateway-like process for issue 30 finding 2: with secrets in its environment (as a real
gateway has them) and hardened like one, it starts the real browser (Playwright's driver,
Chromium) and a real MCP stdio server through chatgate's own code, then runs commands on the
local backend that read those processes' /proc/<pid>/environ. Runs as an unprivileged user.

    python3 children_gateway.py WORKSPACE MCP_STATE_DIR COMMAND...

Prints one JSON object: the child processes found ({pid: [command, environ]}, as this
process itself reads them) and each command's output. `{pids}` in a command is replaced by
the children's pids.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from gateway.config import BrowserSettings, MCPSettings
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext
from gateway.sessions.key import SessionKey
from tools.files.workspace import Workspace
from tools.mcp.manager import MCPManager
from tools.shell.terminal import make_non_dumpable
from tools.shell.terminal.base import Limits, run_command
from tools.shell.terminal.env import safe_env
from tools.shell.terminal.launcher import descendants
from tools.shell.terminal.local import LocalBackend
from tools.web.browser import BrowserManager, find_chromium
from tools.web.netguard import AddressGuard

FAKE_MCP_SERVER = Path(__file__).parents[1] / "fakes" / "mcp_server.py"


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


async def main(workspace: Path, state: Path, commands: list[str]) -> None:
    if not make_non_dumpable():
        sys.exit("could not harden")
    settings = BrowserSettings()
    browser = BrowserManager(
        settings, find_chromium(settings), AddressGuard(), lambda ctx: Workspace(workspace)
    )
    mcp = MCPManager(
        MCPSettings.model_validate(
            {
                "servers": {
                    "notes": {
                        "command": sys.executable,
                        "args": [str(FAKE_MCP_SERVER)],
                        "env": {
                            "FAKE_MCP_DIR": str(state),
                            "PYTHONPATH": os.environ["PYTHONPATH"],
                            "NOTES_API_TOKEN": os.environ["TEST_MCP_TOKEN"],
                        },
                        "startup_timeout_seconds": 30,
                    }
                }
            }
        ),
        max_output_chars=4000,
    )
    ctx = ToolContext(
        session=SessionKey("console", "c1"),
        chat=ChatRef(platform="console", chat_id="c1"),
        user=UserRef(platform="console", user_id="u1"),
    )
    await mcp.start()
    try:
        await mcp.wait_settled()
        async with browser.use(ctx):
            children = {
                pid: [_read(f"/proc/{pid}/cmdline")[:200], _read(f"/proc/{pid}/environ")]
                for pid in descendants(os.getpid())
            }
            pids = " ".join(str(pid) for pid in children)
            local = LocalBackend(Limits())
            outputs = []
            for command in commands:
                result = await run_command(
                    local,
                    command.replace("{pids}", pids),
                    workspace=workspace,
                    cwd=workspace,
                    env=safe_env(),
                    timeout=20,
                    max_chars=200_000,
                )
                outputs.append(result.render(20))
    finally:
        await browser.close()
        await mcp.stop()
    print(json.dumps({"children": children, "outputs": outputs}))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]))
