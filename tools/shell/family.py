"""The terminal family: the shell, execute_code and process tools on the configured terminal
backend, which it chooses when built and closes when the gateway stops (with the processes)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gateway.sdk import (
    ApprovalGate,
    CommandCall,
    Extensions,
    Settings,
    ToolCatalog,
    ToolFamily,
    ToolSpec,
    secret_values,
)
from tools.files.workspace import WorkspaceFor
from tools.files.workspaces import Workspaces
from tools.shell.code import ExecuteCode
from tools.shell.process_tool import ProcessTool
from tools.shell.processes import ProcessTable
from tools.shell.terminal.factory import BackendChoice, build_backend
from tools.shell.tool import ShellTool, gateway_paths


class TerminalTools(ToolFamily):
    """shell, execute_code and process; none when no backend can run here (the sandbox
    cannot, and unsandboxed commands are not allowed): `build_backend` logs why at startup.
    process is offered on the sandbox, local and Docker backends (not over SSH)."""

    name = "terminal"

    def __init__(
        self,
        settings: Settings,
        workspace_for: WorkspaceFor,
        *,
        catalog: ToolCatalog,
        approvals: ApprovalGate | None,
        terminal: BackendChoice | None = None,
        workspaces: Workspaces | None = None,
    ) -> None:
        """`terminal`: the backend to run on (default: the one the settings configure);
        `workspaces`: whose wipes stop the processes running in the wiped folder."""
        self.terminal = build_backend(settings) if terminal is None else terminal
        self.shell_tool: ShellTool | None = None
        self.code_tool: ExecuteCode | None = None
        self.process_tool: ProcessTool | None = None
        self._wipes: set[asyncio.Task[int]] = set()
        backend = self.terminal.backend
        cfg = settings.tools.terminal.processes
        # Only a Docker backend keeps containers to hold alive; its module loads only then.
        docker = backend is not None and backend.name == "docker"
        keep_alive = getattr(backend, "container", None) if docker else None
        self.processes = ProcessTable(
            max_per_chat=cfg.max_per_chat,
            idle_seconds=cfg.idle_seconds,
            max_seconds=cfg.max_seconds,
            buffer_bytes=cfg.output_bytes,
            keep_alive=keep_alive,
        )
        if workspaces is not None:
            workspaces.wiping.append(self._wiping)
        if backend is None:
            return

        def secrets() -> list[str]:
            return secret_values(settings)

        self.shell_tool = ShellTool(
            workspace_for,
            settings.tools,
            backend,
            secrets=secrets,
            protected=gateway_paths(settings),
            workspace_root=settings.workspace,
        )
        self.code_tool = ExecuteCode(
            workspace_for,
            settings,
            backend,
            catalog=catalog,
            approvals=approvals,
            secrets=secrets,
        )
        if cfg.max_per_chat > 0 and backend.name in ("sandbox", "local", "docker"):
            self.process_tool = ProcessTool(self.shell_tool, self.processes)

    def specs(self) -> list[ToolSpec[Any]]:
        if self.shell_tool is None or self.code_tool is None:
            return []
        processes = [self.process_tool.spec()] if self.process_tool is not None else []
        return [*self.shell_tool.specs(), *self.code_tool.specs(), *processes]

    def register(self, extensions: Extensions) -> None:
        if self.process_tool is not None:
            extensions.add_stop_hook(self.stop_all)

    async def stop_all(self, call: CommandCall) -> str | None:
        """`/stop all`: the chat's processes end."""
        stopped = await self.processes.stop_chat(call.session.chat_scope, "/stop all")
        return f"Stopped {stopped} process(es)." if stopped else None

    def _wiping(self, folder: Path) -> None:
        """A chat's folder is about to be wiped: its processes end (the sweep catches any
        that outlive this, finding the folder gone)."""
        if any(p.alive for p in self.processes.all()):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # not called from the gateway's loop: the sweep ends them
                return
            task = loop.create_task(self.processes.stop_under(folder, "its workspace was wiped"))
            self._wipes.add(task)
            task.add_done_callback(self._wipes.discard)

    async def start(self) -> None:
        self.processes.start()

    async def close(self) -> None:
        await self.processes.close()
        await self.terminal.close()
