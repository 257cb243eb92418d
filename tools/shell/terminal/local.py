"""The local backend: commands run on the gateway's host, in the workspace, under the
launcher (limits, no escaping children), as an unprivileged user when the gateway is root.

It isolates little else: the command sees the whole filesystem with that user's rights and
the network, and every chat's workspace belongs to that one user. The gateway's own secrets
stay out of reach because its environment is not passed on, it is non-dumpable, (as root)
the command runs as another user, and where the kernel has Landlock the command runs in a
domain of its own: it cannot read the /proc of the gateway, the launcher, the browser or
MCP servers, and (Landlock 6) cannot signal them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from tools.shell.terminal.base import BackendUnavailable, Limits, Running
from tools.shell.terminal.launcher import SIGNAL_SCOPE_ABI, landlock_abi
from tools.shell.terminal.process import RunAs, hand_over, launch


class LocalBackend:
    name = "local"
    isolated = False

    def __init__(self, limits: Limits, *, user: str = "") -> None:
        self._limits = limits
        self._run_as: RunAs | None = None
        if os.geteuid() == 0:
            if not user:
                raise BackendUnavailable(
                    "the gateway runs as root, so the local backend needs "
                    "tools.terminal.local.user (an unprivileged user that cannot read the "
                    "data directory or config)"
                )
            self._run_as = RunAs.lookup(user)
        # The kernel's Landlock version (0: none); commands get a domain of their own when > 0.
        self.landlock = landlock_abi()

    @property
    def run_as(self) -> RunAs | None:
        return self._run_as

    def confinement_gaps(self) -> list[str]:
        """What a command here can do to the gateway's other processes that it should not,
        one plain sentence each (empty when confined; root runs commands as another user)."""
        if self._run_as is not None:
            return []
        if self.landlock == 0:
            return [
                "the kernel has no Landlock, so a command can read the /proc/<pid>/environ of "
                "the browser and MCP servers and stop or kill its own supervisor"
            ]
        if self.landlock < SIGNAL_SCOPE_ABI:
            return [
                f"the kernel's Landlock is version {self.landlock} (signals are scoped from "
                f"{SIGNAL_SCOPE_ABI}, Linux 6.12), so a command can stop or kill its own "
                "supervisor and the gateway"
            ]
        return []

    def describe(self) -> str:
        who = f" as {self._run_as.name}" if self._run_as else ""
        return f"on the gateway host{who} (not sandboxed)"

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 - the caller stops the command
        stdin: bool = False,
        split_stderr: bool = False,
        pins: Sequence[tuple[str, str]] = (),
    ) -> Running:
        env = dict(env)
        if self._run_as is not None:
            await asyncio.to_thread(hand_over, workspace, self._run_as)
            env.update(HOME=self._run_as.home, USER=self._run_as.name, LOGNAME=self._run_as.name)
        return await launch(
            argv,
            cwd=cwd,
            env=env,
            limits=self._limits,
            run_as=self._run_as,
            stdin=stdin,
            split_stderr=split_stderr,
            confine=self.landlock > 0,
            pins=pins,
        )
