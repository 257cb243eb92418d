"""The terminal family: the shell and execute_code tools on the configured terminal backend,
which it chooses when built and closes when the gateway stops."""

from __future__ import annotations

from typing import Any

from gateway.sdk import ApprovalGate, Settings, ToolCatalog, ToolFamily, ToolSpec, secret_values
from tools.files.workspace import WorkspaceFor
from tools.shell.code import ExecuteCode
from tools.shell.terminal.factory import BackendChoice, build_backend
from tools.shell.tool import ShellTool, gateway_paths


class TerminalTools(ToolFamily):
    """shell and execute_code; neither when no backend can run here (the sandbox cannot, and
    unsandboxed commands are not allowed): `build_backend` logs why at startup."""

    name = "terminal"

    def __init__(
        self,
        settings: Settings,
        workspace_for: WorkspaceFor,
        *,
        catalog: ToolCatalog,
        approvals: ApprovalGate | None,
        terminal: BackendChoice | None = None,
    ) -> None:
        """`terminal`: the backend to run on (default: the one the settings configure)."""
        self.terminal = build_backend(settings) if terminal is None else terminal
        self.shell_tool: ShellTool | None = None
        self.code_tool: ExecuteCode | None = None
        backend = self.terminal.backend
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

    def specs(self) -> list[ToolSpec[Any]]:
        if self.shell_tool is None or self.code_tool is None:
            return []
        return [*self.shell_tool.specs(), *self.code_tool.specs()]

    async def close(self) -> None:
        await self.terminal.close()
