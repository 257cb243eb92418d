"""execute_code on the real sandbox: a script calls the session's tools through the RPC
channel, each call taking the agent's path (policy, validation, approval); time, output and
call limits; the calls made are listed."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from gateway.config import Settings
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ApprovalNeed, ApprovalOutcome, ToolContext, ToolSpec
from gateway.sessions.key import SessionKey
from tests.fixtures_terminal import host_pids
from tools.files.workspace import Workspace
from tools.policy import ToolPolicy
from tools.registry import ToolRegistry
from tools.shell.code import CodeArgs, ExecuteCode
from tools.shell.terminal.base import TerminalBackend

CTX = ToolContext(
    session=SessionKey("console", "t"),
    chat=ChatRef(platform="console", chat_id="t"),
    user=UserRef(platform="console", user_id="u"),
)


@dataclass
class Person:
    """The approval gate as the chat would answer it: a person who approves or denies."""

    approve: bool = True
    asked: list[tuple[str, ApprovalNeed]] = field(default_factory=list)
    asks_after_untrusted: bool = True

    async def decide(self, need: ApprovalNeed, tool: str, ctx: ToolContext) -> ApprovalOutcome:
        self.asked.append((tool, need))
        if self.approve:
            return ApprovalOutcome(True, "approved by Ana")
        return ApprovalOutcome(False, "denied by Ana: not today")


class AddArgs(BaseModel):
    a: int
    b: int


class TextArgs(BaseModel):
    text: str


class PathArgs(BaseModel):
    path: str


class SleepArgs(BaseModel):
    seconds: float


class NoArgs(BaseModel):
    pass


def session_tools(ran: list[str]) -> list[ToolSpec[Any]]:
    async def add(args: AddArgs, ctx: ToolContext) -> str:
        ran.append("add")
        return str(args.a + args.b)

    async def upper(args: TextArgs, ctx: ToolContext) -> str:
        ran.append("upper")
        return args.text.upper()

    async def size(args: TextArgs, ctx: ToolContext) -> str:
        return str(len(args.text))

    async def secret(args: NoArgs, ctx: ToolContext) -> str:
        ran.append("secret_tool")
        return "the secret"

    async def ask(args: PathArgs, ctx: ToolContext) -> ApprovalNeed | None:
        return ApprovalNeed(summary=f"delete {args.path}", reason="deletes files")

    async def delete(args: PathArgs, ctx: ToolContext) -> str:
        ran.append("delete")
        return f"deleted {args.path}"

    async def slow(args: SleepArgs, ctx: ToolContext) -> str:
        await asyncio.sleep(args.seconds)
        return "slept"

    def spec(name: str, args: type[BaseModel], handler: Any, **kw: Any) -> ToolSpec[Any]:
        return ToolSpec(name=name, description=name, args=args, handler=handler, group="x", **kw)

    return [
        spec("add", AddArgs, add),
        spec("upper", TextArgs, upper),
        spec("size", TextArgs, size),
        spec("secret_tool", NoArgs, secret),
        spec("delete", PathArgs, delete, approval=ask),
        spec("slow", SleepArgs, slow),
    ]


@dataclass
class Session:
    tool: ToolSpec[Any]
    person: Person
    ran: list[str]

    async def run(self, code: str) -> str:
        return await self.tool.handler(CodeArgs(code=code), CTX)

    async def approval(self, args: CodeArgs) -> ApprovalNeed | None:
        # execute_code always has an approval gate; it decides per script whether to ask.
        assert self.tool.approval is not None
        return await self.tool.approval(args, CTX)


Build = Callable[..., Session]


@pytest.fixture
def build(open_dir: Path, make_sandbox: Callable[..., TerminalBackend]) -> Build:
    def make(
        backend: TerminalBackend | None = None, quota_bytes: int = 0, **terminal: Any
    ) -> Session:
        settings = Settings(
            data_dir=open_dir / "data",
            tools={"deny": ["secret_tool"], "max_output_chars": 4000, "terminal": terminal},
        )
        ran: list[str] = []
        person = Person()
        registry = ToolRegistry(session_tools(ran))
        tools = ExecuteCode(
            lambda ctx: Workspace(open_dir / "ws", quota_bytes=quota_bytes),
            settings,
            backend or make_sandbox(),
            catalog=registry,
            approvals=person,
        ).specs()
        registry.extend(tools)
        registry.set_filter(ToolPolicy(settings.tools))
        return Session(tools[0], person, ran)

    return make


async def test_a_script_calls_two_tools(build: Build) -> None:
    session = build()
    out = await session.run(
        "total = tools.call('add', a=1, b=2)\n"
        "shout = tools.upper(text='hello')\n"
        "print(total, shout)\n"
    )
    assert out == "3 HELLO\n[exit code 0]\n[tool calls (2): add ok, upper ok]"
    assert session.ran == ["add", "upper"]


async def test_a_denied_tool_is_refused_and_never_runs(build: Build) -> None:
    session = build()
    out = await session.run(
        "for name in ('secret_tool', 'execute_code', 'nope'):\n"
        "    try:\n"
        "        tools.call(name)\n"
        "    except ToolCallError as exc:\n"
        "        print('refused:', exc)\n"
    )
    assert "refused: the tool 'secret_tool' is not allowed here" in out
    assert "refused: the tool 'execute_code' is not allowed here" in out
    assert "refused: there is no tool named 'nope'" in out
    assert "secret_tool error, execute_code error, nope error" in out
    assert session.ran == []


@pytest.mark.parametrize("approve", [True, False])
async def test_an_approval_inside_a_script(build: Build, approve: bool) -> None:
    session = build()
    session.person.approve = approve
    out = await session.run(
        "try:\n"
        "    print(tools.delete(path='build'))\n"
        "except ToolCallError as exc:\n"
        "    print('not done:', exc)\n"
    )
    [(tool, need)] = session.person.asked
    assert tool == "delete" and need.summary == "delete build"
    if approve:
        assert "deleted build" in out and session.ran == ["delete"]
        assert out.endswith("[tool calls (1): delete ok]")
    else:
        assert "not done: not run: denied by Ana: not today" in out and session.ran == []
        assert out.endswith("[tool calls (1): delete error]")


async def test_a_script_that_hangs_is_stopped(build: Build) -> None:
    mark = f"hang-{secrets.token_hex(4)}"
    session = build(code_timeout=1)
    out = await session.run(
        f"# {mark}\nimport time\nprint('before', flush=True)\ntime.sleep(600)\n"
    )
    assert out.startswith("before\n[timed out after 1 s")
    assert out.endswith("[tool calls: none]")
    assert not host_pids(mark)


async def test_time_inside_tool_calls_does_not_count(build: Build) -> None:
    session = build(code_timeout=1)
    out = await session.run("print(tools.slow(seconds=0.8), tools.slow(seconds=0.8))")
    assert out.startswith("slept slept\n[exit code 0]")


async def test_tool_call_limit(build: Build) -> None:
    session = build(code_max_tool_calls=2)
    out = await session.run(
        "for i in range(3):\n"
        "    try:\n"
        "        print(tools.add(a=i, b=i))\n"
        "    except ToolCallError as exc:\n"
        "        print('stopped:', exc)\n"
    )
    assert "0\n2\nstopped: the limit of 2 tool calls per script is reached" in out
    assert out.endswith("[tool calls (3): add ok, add ok, add error]")


async def test_large_arguments_and_output_limit(build: Build) -> None:
    session = build()
    out = await session.run("print(tools.size(text='x' * 300_000))\nprint('y' * 50_000)")
    assert out.startswith("300000\n") and "bytes of output cut" in out


async def test_script_errors_are_shown(build: Build) -> None:
    out = await build().run("import sys\nprint('partial')\nraise ValueError('boom')")
    assert "partial" in out and "ValueError: boom" in out and "[exit code 1]" in out


async def test_approval_of_the_script_itself(
    build: Build, make_local: Callable[..., TerminalBackend]
) -> None:
    args = CodeArgs(code="print(1)")
    assert await build().approval(args) is None  # sandboxed: runs without asking
    local = make_local()
    need = await build(local).approval(args)
    assert need is not None and need.where == local.describe() and need.summary == "print(1)"
    assert await build(code_approval="always").approval(args) is not None
    assert await build(local, code_approval="never").approval(args) is None


async def test_a_script_that_fills_the_workspace_past_its_quota_is_stopped(
    build: Build, open_dir: Path
) -> None:
    session = build(quota_bytes=1_000_000)
    out = await session.run(
        "import time\n"
        "for i in range(60):\n"
        "    open(f'f{i}', 'wb').write(bytes(100_000))\n"
        "    time.sleep(0.1)\n"
        "print('all')\n"
    )
    assert "[stopped: the workspace holds" in out and "past its quota of 1,000,000" in out
    assert "all" not in out.splitlines()
    assert Workspace(open_dir / "ws").used_bytes() < 3_000_000
