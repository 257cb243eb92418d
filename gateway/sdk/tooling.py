"""How the core sees a tool: a spec with a pydantic argument model and an async handler.

Tool modules live in `tools/`; they build `ToolSpec`s and `app.py` hands the
catalogue to the agent, so the core never imports a tool by name.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from gateway.llm.types import Completer
from gateway.sdk.messages import Attachment, ChatRef, UserRef
from gateway.sessions.key import SessionKey

if TYPE_CHECKING:
    from gateway.sessions.fencing import TurnFence
    from gateway.turn.toolbox import Toolbox

A = TypeVar("A", bound=BaseModel)


class ToolError(Exception):
    """A failure the model should read and act on (bad path, missing file, refused call).

    The message is shown to the model verbatim, so it says what went wrong and what to do.
    """


class TypingControl(Protocol):
    """The running turn's typing indicator; a tool that waits for a person pauses it."""

    def paused(self) -> AbstractAsyncContextManager[None]: ...


class _NoPause:
    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        yield


NO_TYPING: TypingControl = _NoPause()


class StreamControl(Protocol):
    """The running turn's streamed reply; a tool that sends its own message (an approval
    prompt, a question) pauses it, so the message being written is finished first and the
    reply goes on below what the tool sent."""

    def paused(self) -> AbstractAsyncContextManager[None]: ...


NO_STREAM: StreamControl = _NoPause()


@dataclass
class TurnTrust:
    """What outside content entered one turn; approvals/untrusted.py decides what follows."""

    ask: bool = True  # after outside content, calls with side effects wait for a person
    sources: list[str] = field(default_factory=list)  # "web_fetch https://example.com/" ...
    arrivals: int = 0  # times outside content entered, a source read twice counted twice
    # Where a URL may come from without asking: the person's message and the pages fetched
    # (`ToolSpec.page_links`), never other tools' results or errors, so a link followed from
    # a page can be told from an address the model made up (or had echoed) to carry data out.
    seen: list[str] = field(default_factory=list)
    seen_chars: int = 0

    @property
    def tainted(self) -> bool:
        return bool(self.sources)


@dataclass
class ShownImages:
    """Images that tool results brought into one agent run (an MCP server's screenshot...),
    shown to the model as image parts right after those results, scaled to `max_px`.
    Request-only: history keeps the tool's note ("[image: image/png, 12 KB]"), not the bytes."""

    max_px: int
    pending: list[bytes] = field(default_factory=list)

    def show(self, data: bytes) -> None:
        self.pending.append(data)

    def take(self) -> list[bytes]:
        taken, self.pending = self.pending, []
        return taken


@dataclass(frozen=True)
class SpunOff:
    """Models for work that goes on after its turn (a background task), and how to record
    what it used against the turn's budgets once it is done (never raises)."""

    llm: Completer
    settle: Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class ToolContext:
    """Who and where a tool call runs for; long-lived dependencies are bound at build time."""

    session: SessionKey
    chat: ChatRef
    user: UserRef
    turn_id: str = ""
    is_subagent: bool = False
    # The platform message that started the turn, so tools can reply in place.
    message_id: str | None = None
    # The attachments on that message (earlier ones are noted in the stored history).
    attachments: tuple[Attachment, ...] = ()
    # The text of that message: what the person themselves wrote in this turn.
    user_text: str = ""
    typing: TypingControl = NO_TYPING
    # What outside content entered this turn (approvals/untrusted.py); set by the agent, shared
    # with sub-agents and execute_code's calls. None: not inside an agent run.
    trust: TurnTrust | None = None
    # Outside content the person's message itself brought in (the text of documents they
    # sent, "file report.pdf"): the turn starts with it (approvals/untrusted.py `begin`).
    outside: tuple[str, ...] = ()
    stream: StreamControl = NO_STREAM
    # The run's hold on its session (sessions/fencing.py): effects check it in the store, and a
    # run another took over stops there. None outside a turn (a scheduled job's own calls).
    fence: TurnFence | None = None
    # The turn's tool scope and models (its profile's chain), for sub-agents to share.
    scope: ToolScope | None = None
    llm: Completer | None = None
    # Models of the turn's chain for work that outlives the turn, with usage settled on its
    # own (TurnPlan.spin_off); None outside a planned turn.
    spin_off: Callable[[], SpunOff] | None = None
    # How many delegations deep this call runs (0: the agent the person talks to).
    depth: int = 0
    # Which sub-task of a delegate batch made the call, shown when it asks for approval.
    task_label: str = ""
    # The running agent loop's tools; load_tools adds to it (set by Agent.run).
    toolbox: Toolbox | None = None
    # Set when the turn's model may see images (llm.vision not off, not known to refuse):
    # tools put the images their results carry here. Each Agent.run has its own.
    images: ShownImages | None = None


@dataclass(frozen=True)
class ApprovalNeed:
    """A call that must wait for a person's approval before it runs."""

    summary: str  # the exact thing that will run, shown to the approver
    reason: str  # one line: why this needs approval
    # Calls with the same shape may be pre-approved for the rest of the session.
    shape: str = ""
    cwd: str | None = None
    where: str = ""  # where it runs, e.g. "in the sandbox", "on build-host via SSH"
    untrusted: str = ""  # outside content that entered the turn first ("web_fetch example.com")
    # Only an admin may decide, whatever access.approvers says (e.g. a skill the agent wrote).
    admins_only: bool = False
    # False: the shape cannot pin what the call will touch (its targets are only known when
    # it runs), so it may be approved once only, never for the session or always.
    standing: bool = True


@dataclass(frozen=True)
class ToolSpec(Generic[A]):
    name: str
    description: str
    args: type[A]
    handler: Callable[[A, ToolContext], Awaitable[str]]
    group: str
    # Decides per call whether approval is needed (None: never).
    approval: Callable[[A, ToolContext], Awaitable[ApprovalNeed | None]] | None = None
    timeout: float | None = None  # overrides the agent's per-tool timeout
    extras: dict[str, Any] = field(default_factory=dict)
    # Its result is outside content (a web page, an MCP server's answer, a file someone
    # sent): shown to the model marked as data, and the rest of the turn asks before acting.
    untrusted_output: bool | Callable[[A, ToolContext], bool] = False
    # Whether a call changes things or sends data out, which after outside content entered
    # the turn waits for a person (`approvals.after_untrusted`). True: every call, shown as
    # the tool's arguments; a function: the approval to ask for this call, None when the
    # call only reads (the shell: read-only commands).
    side_effects: bool | Callable[[A, ToolContext], Awaitable[ApprovalNeed | None]] = False
    # Its result is a page someone asked for (a fetched web page, search results): after
    # outside content, the URLs in a successful result may be fetched without asking.
    page_links: bool = False
    # The line a streamed reply shows while the call runs ("Reading notes.md"); None: the
    # generic "Running <name>: `<main argument>`". Secrets are scrubbed from it either way.
    progress: Callable[[A], str] | None = None
    # Why the tool is not offered in a scope (None: it is), for tools that need what only some
    # platforms have (read_channel: an adapter that can read a conversation's history). The
    # registry leaves it out of such scopes before the policy is asked.
    unavailable: Callable[[ToolScope], str | None] | None = None

    def unavailable_in(self, scope: ToolScope) -> str | None:
        """Why this tool is not offered in `scope`, or None when it is."""
        return None if self.unavailable is None else self.unavailable(scope)

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry for this tool (built once: it is sent on every LLM call)."""
        return _schema(self.name, self.description, self.args)


@functools.lru_cache(maxsize=512)
def _schema(name: str, description: str, args: type[BaseModel]) -> dict[str, Any]:
    params = args.model_json_schema()
    params.pop("title", None)
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": params},
    }


@dataclass(frozen=True)
class ToolScope:
    """Where a turn runs; the tool policy decides per scope which tools the model gets."""

    platform: str
    chat_id: str
    provider: str
    model: str
    is_subagent: bool = False
    profile: str = ""  # the agent profile ([profiles.<name>]) the turn runs under


class ToolCatalog(Protocol):
    def for_scope(self, scope: ToolScope) -> Sequence[ToolSpec[Any]]:
        """Tools the policy allows in this scope."""
        ...

    def get(self, name: str) -> ToolSpec[Any] | None:
        """Any registered tool, allowed here or not (so refusals can name the reason)."""
        ...

    def toolbox(
        self, scope: ToolScope, loaded: Sequence[str] = (), *, exclude: Sequence[str] = ()
    ) -> Toolbox:
        """What a turn in this scope offers: the allowed tools but `exclude`, on demand or all
        at once; `loaded` are tools the session loaded in earlier turns."""
        ...


class ApprovalGate(Protocol):
    async def decide(self, need: ApprovalNeed, tool: str, ctx: ToolContext) -> ApprovalOutcome:
        """Wait for a person's decision on a call; a timeout is a deny."""
        ...

    @property
    def asks_after_untrusted(self) -> bool:
        """Whether calls with side effects ask once outside content entered the turn."""
        ...


@dataclass(frozen=True)
class ApprovalOutcome:
    approved: bool
    message: str  # told to the model: "approved by Ana", "denied by Ana: not now", "expired"
