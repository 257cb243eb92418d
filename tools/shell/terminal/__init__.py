"""Terminal backends: where the shell tool's commands and execute_code's scripts run
(sandbox, local, ssh, docker), behind one interface (`base.TerminalBackend`)."""

from tools.shell.terminal.base import BackendUnavailable, Limits, RunResult, TerminalBackend
from tools.shell.terminal.env import safe_env
from tools.shell.terminal.privileges import make_non_dumpable

__all__ = [
    "BackendUnavailable",
    "Limits",
    "RunResult",
    "TerminalBackend",
    "make_non_dumpable",
    "safe_env",
]
