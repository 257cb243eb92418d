"""The shell tool: run a bash command in the workspace. `classify` judges each call: allow
runs it, ask waits for a person's approval in the chat, block never runs it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

import gateway
import tools
from gateway.config import Settings, ToolsSettings, config_path
from gateway.tooling import ApprovalNeed, ToolContext, ToolError, ToolSpec
from tools.args import ToolArgs
from tools.shellsafety import ShellPolicy, Verdict, classify
from tools.skills import bundled_skills_dir
from tools.workspace import Workspace

__all__ = [
    "ShellArgs",
    "ShellPolicy",
    "Verdict",
    "classify",
    "gateway_paths",
    "safe_env",
    "shell_tools",
]

log = logging.getLogger(__name__)

GROUP = "runtime"
KILL_GRACE = 2.0  # seconds a timed-out process group gets between SIGTERM and SIGKILL
DRAIN_SECONDS = 0.5  # how long output is still read after the shell has exited
_READ_CHUNK = 65536
_POLL_SECONDS = 0.02

_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH|COOKIE|"
    r"SESSION|SIGNING|DSN|(^|_)(KEY|PAT|PASS|PWD)(_|$)",
    re.IGNORECASE,
)
_KEEP = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TERM",
        "USER",
        "LOGNAME",
        "SHELL",
        "TZ",
        "TMPDIR",
        "PWD",
        "OLDPWD",
        "HOSTNAME",
        "COLORTERM",
        "VIRTUAL_ENV",
    }
)
_URL_CREDENTIALS = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
# stdin is /dev/null: anything that prompts would only hang until the timeout.
_NON_INTERACTIVE = {
    "GIT_TERMINAL_PROMPT": "0",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "DEBIAN_FRONTEND": "noninteractive",
}

DESCRIPTION = (
    "Run a bash command in the workspace; returns output and exit code. Each call is a fresh "
    "shell with empty stdin (use cwd or `cd x && ...`, and -y flags). Destructive commands "
    "(rm -r, force push, kill -9, DROP TABLE, curl | sh ...) wait for a person's approval; "
    "a few (rm -rf /, mkfs, shutdown) are blocked. Background processes end with the call."
)


class ShellArgs(ToolArgs):
    command: str = Field(min_length=1, description="The bash command line to run.")
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds before it is stopped (capped by the gateway)."
    )
    cwd: str | None = Field(
        default=None,
        description="Directory to run in, relative to the workspace (default: the workspace root).",
    )


def shell_tools(
    workspace: Workspace,
    settings: ToolsSettings,
    *,
    secrets: Callable[[], Iterable[str]] | None = None,
    protected: Iterable[tuple[str, str, bool]] = (),
) -> list[ToolSpec[Any]]:
    """`protected`: the gateway's own places (see `gateway_paths`) commands may not write,
    delete or (the secret ones) read without asking."""
    policy = ShellPolicy.compile(
        allow=settings.shell_extra_allow,
        ask=settings.shell_extra_ask,
        block=settings.shell_extra_block,
        protected_paths=protected,
        workspace=str(workspace.root),
    )
    limit = settings.shell_timeout

    def where(args: ShellArgs) -> Path:
        path = workspace.resolve(args.cwd) if args.cwd else workspace.root
        if not path.is_dir():
            raise ToolError(f"cwd {args.cwd!r} is not a directory in the workspace.")
        return path

    def judge(args: ShellArgs, cwd: Path) -> Verdict:
        if "\x00" in args.command:
            raise ToolError("the command contains a NUL byte; remove it.")
        return classify(args.command, policy=policy, cwd=str(cwd))

    async def approval(args: ShellArgs, ctx: ToolContext) -> ApprovalNeed | None:
        cwd = where(args)
        verdict = judge(args, cwd)
        if verdict.action != "ask":
            return None  # allow runs; block is refused by the handler without asking anyone
        return ApprovalNeed(
            summary=args.command,
            reason=verdict.reason,
            shape=verdict.shape,
            cwd=workspace.relative(cwd),
        )

    async def shell(args: ShellArgs, ctx: ToolContext) -> str:
        cwd = where(args)
        # Checked again here: the handler must never rely on the approval step alone.
        verdict = judge(args, cwd)
        if verdict.action == "block":
            log.warning("shell blocked session=%s reason=%r", ctx.session, verdict.reason)
            raise ToolError(
                f"refused: {verdict.reason}. This command is blocked and cannot be approved; "
                "find a safer way or ask the user to run it themselves."
            )
        timeout = min(args.timeout or limit, limit)
        env = safe_env(secrets() if secrets else ())
        result = await run_command(
            args.command, cwd=cwd, env=env, timeout=timeout, max_chars=settings.max_output_chars
        )
        log.info(
            "shell ran session=%s verdict=%s exit=%s timed_out=%s",
            ctx.session,
            verdict.action,
            result.exit_code,
            result.timed_out,
        )
        return result.render(timeout)

    return [
        ToolSpec(
            name="shell",
            description=DESCRIPTION,
            args=ShellArgs,
            handler=shell,
            group=GROUP,
            approval=approval,
            # Our own timeout and kill must fire before the agent gives up on the call.
            timeout=limit + KILL_GRACE + DRAIN_SECONDS + 5,
        )
    ]


def gateway_paths(settings: Settings) -> list[tuple[str, str, bool]]:
    """The gateway's own places as (absolute path, label, reading it exposes secrets):
    its data directory and store, the skills read into every prompt, its config, its code."""
    data = settings.data_dir.expanduser().resolve()
    places: list[tuple[Path, str, bool]] = [
        (data, "the gateway's data directory", True),
        (data / "chatgate.db", "the gateway's store (every chat's history)", True),
        (data / "skills", "installed skills, read into every chat's prompt", False),
        (bundled_skills_dir(), "bundled skills, read into every chat's prompt", False),
        *(
            (Path(p).resolve(), "the gateway's code", False)
            for p in (*gateway.__path__, *tools.__path__)
        ),
    ]
    config = config_path()  # a path given with --config alone is not known here
    if config is not None:
        places.append((config.expanduser().resolve(), "the gateway's config file", True))
    return [(str(path), label, secret) for path, label, secret in places]


def safe_env(secrets: Iterable[str] = (), base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The gateway's environment minus anything that looks like or holds a secret."""
    source = os.environ if base is None else base
    values = [s for s in secrets if s]
    env: dict[str, str] = {}
    for name, value in source.items():
        if name.upper().startswith("CHATGATE_"):
            continue
        if name not in _KEEP and not name.startswith("LC_") and _SECRET_NAME.search(name):
            continue
        if _URL_CREDENTIALS.search(value):
            continue
        # Equal to a secret, or containing a long one ("Bearer <token>").
        if any(value == s or (len(s) >= 8 and s in value) for s in values):
            continue
        env[name] = value
    env.update(_NON_INTERACTIVE)
    return env


@dataclass(frozen=True)
class RunResult:
    output: str
    exit_code: int | None
    timed_out: bool

    def render(self, timeout: float) -> str:
        body = self.output.rstrip("\n") or "(no output)"
        if self.timed_out:
            status = (
                f"[timed out after {timeout:g} s; the command and its child processes were stopped]"
            )
        elif self.exit_code is not None and self.exit_code < 0:
            status = f"[killed by signal {-self.exit_code}]"
        else:
            status = f"[exit code {self.exit_code}]"
        return f"{body}\n{status}"


class OutputBuffer:
    """Keeps the first and last `limit` bytes of a stream of any size."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: -self.limit]

    def render(self) -> str:
        """Everything if it fits in `limit` characters, else head and tail around a cut line."""
        limit = self.limit
        if self.total <= len(self.head) + len(self.tail):  # nothing was dropped
            text = bytes(self.head + self.tail).decode("utf-8", errors="replace")
            if len(text) <= limit:
                return text
            head, tail = text[: limit // 2], text[-(limit // 2) :]
        else:
            head = self.head.decode("utf-8", errors="replace")[: limit // 2]
            tail = self.tail.decode("utf-8", errors="replace")[-(limit // 2) :]
        cut = self.total - len(head.encode()) - len(tail.encode())
        return f"{head}\n[... {cut:,} bytes of output cut ...]\n{tail}"


async def run_command(
    command: str,
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,  # noqa: ASYNC109 - the command's own limit, enforced by killing its group
    max_chars: int,
) -> RunResult:
    """Run `bash -c command` in its own process group; stop the whole group when done."""
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        command,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    buffer = OutputBuffer(max_chars)
    assert proc.stdout is not None
    reader = asyncio.create_task(_pump(proc.stdout, buffer))
    timed_out = False
    try:
        if not await _exited(proc, timeout):
            timed_out = True
            _signal_group(proc.pid, signal.SIGTERM)
            if not await _exited(proc, KILL_GRACE):
                _signal_group(proc.pid, signal.SIGKILL)
                await _exited(proc, KILL_GRACE)
        # Background children left behind would keep the pipe open and run unattended.
        _signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_SECONDS)
    finally:
        _signal_group(proc.pid, signal.SIGKILL)  # also when the call itself is cancelled
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    return RunResult(buffer.render(), proc.returncode, timed_out)


async def _exited(proc: asyncio.subprocess.Process, seconds: float) -> bool:
    """Wait up to `seconds` for the shell itself to exit.

    Polled: on Python 3.11 `Process.wait()` also waits for the output pipe to close,
    which a background child can hold open for as long as it likes.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while proc.returncode is None:
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_POLL_SECONDS)
    return True


async def _pump(stream: asyncio.StreamReader, buffer: OutputBuffer) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        buffer.feed(chunk)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
