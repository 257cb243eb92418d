"""The agentic loop: call the model with the allowed tools, run its calls, repeat until it answers.

The loop never raises for anything the model does (bad arguments, unknown tools,
tools that crash or hang); those become tool results the model can read and
correct. Only LLM errors propagate, for the turn runner to report.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from gateway.approvals import untrusted
from gateway.config import AgentSettings
from gateway.llm import lenient_json
from gateway.llm.images import image_part, text_part
from gateway.llm.types import Completer, Completion, Message, ToolCall, Usage
from gateway.media.images import ImageError, prepare_image
from gateway.runtime.telemetry import Telemetry
from gateway.sdk.tooling import (
    ApprovalGate,
    ApprovalNeed,
    ShownImages,
    ToolCatalog,
    ToolContext,
    ToolError,
    ToolSpec,
)
from gateway.turn.toolbox import Toolbox

if TYPE_CHECKING:
    from gateway.turn.steering import Joined

log = logging.getLogger(__name__)

FINAL_ANSWER_PROMPT = (
    "You have reached the limit of tool use for this request. Do not call any more tools. "
    "Answer the user now with what you have, and say briefly what is left undone."
)


@dataclass
class AgentResult:
    text: str
    new_messages: list[Message]  # everything this turn added after the user's message
    usage: Usage
    iterations: int
    tool_calls: int = 0
    limit_hit: str | None = None  # "iterations" | "tokens" | "time"


@dataclass
class _TurnBudget:
    settings: AgentSettings
    llm: Completer  # the model (or chain of models) this run calls
    events: AgentEvents | None = None  # rides along: every completion of the turn streams
    started: float = field(default_factory=time.monotonic)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, usage: Usage) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens

    @property
    def usage(self) -> Usage:
        return Usage(self.prompt_tokens, self.completion_tokens)

    @property
    def remaining_seconds(self) -> float:
        return self.settings.max_turn_seconds - (time.monotonic() - self.started)

    @property
    def tokens_exhausted(self) -> bool:
        return self.prompt_tokens + self.completion_tokens >= self.settings.max_tokens_per_turn


class TurnTimeout(Exception):
    """The turn used up its wall-time budget."""


class AgentEvents(Protocol):
    """What the loop reports while it works; the turn's streamed reply listens
    (gateway/streaming/reply.py). None of these may raise."""

    async def text(self, delta: str) -> None:
        """Visible reply text as the model writes it (no reasoning, no call markup)."""

    async def reasoning(self, delta: str) -> None: ...

    async def tool_calls(self, calls: Sequence[ToolCall]) -> None:
        """The completion asked for these calls, so its text was not the answer."""

    async def tool_result(self, call: ToolCall, output: str) -> None: ...


class Agent:
    def __init__(
        self,
        llm: Completer,
        settings: AgentSettings,
        *,
        approvals: ApprovalGate | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._llm = llm
        self._settings = settings
        self._approvals = approvals
        self._telemetry = telemetry

    @property
    def llm(self) -> Completer:
        return self._llm

    async def run(
        self,
        system_prompt: str,
        history: Sequence[Message],
        tools: Sequence[ToolSpec[Any]] | Toolbox,
        ctx: ToolContext,
        *,
        catalog: ToolCatalog | None = None,
        events: AgentEvents | None = None,
        llm: Completer | None = None,
        limits: AgentSettings | None = None,
        steer: Callable[[], Awaitable[Joined]] | None = None,
    ) -> AgentResult:
        """Run one turn. `history` ends with the user's message; it is not modified.

        `tools` is a fixed list or a Toolbox, which may offer more tools from one step to the
        next (load_tools); its current tools are sent on every step. `events`, when given,
        hears the reply as it streams and the tool calls as they run. `llm` and `limits`
        replace the agent's own for this run (a profile's models and limits). `steer`, asked
        before each model call, gives the later messages of the person that join the turn
        there (gateway/turn/steering.py); they become part of the turn's new messages, and
        other people's among them count as outside content for the turn's approvals.
        """
        settings = limits or self._settings
        gate = self._approvals
        ctx = untrusted.begin(ctx, ask=gate.asks_after_untrusted if gate is not None else True)
        budget = _TurnBudget(settings, llm or self._llm, events)
        box = tools if isinstance(tools, Toolbox) else Toolbox(tools)
        images = ShownImages(ctx.images.max_px) if ctx.images is not None else None
        ctx = dataclasses.replace(ctx, toolbox=box, images=images)
        added: list[Message] = []
        shown: list[tuple[int, Message]] = []  # (after added[:n], images): request-only
        calls_made = 0

        def transcript() -> list[Message]:
            messages: list[Message] = [{"role": "system", "content": system_prompt}, *history]
            start = 0
            for at, message in shown:
                messages += added[start:at]
                messages.append(message)
                start = at
            return messages + added[start:]

        for iteration in range(1, settings.max_iterations + 1):
            if steer is not None:
                joined = await steer()
                added.extend(joined.messages)
                if joined.others:
                    untrusted.note_outside(ctx, f"messages from {', '.join(joined.others)}")
            schemas = [spec.schema() for spec in box.specs()] or None
            completion = await self._complete(transcript(), schemas, budget)
            added.append(completion.assistant_message())
            if not completion.tool_calls:
                return AgentResult(
                    completion.content or "", added, budget.usage, iteration, calls_made
                )
            calls_made += len(completion.tool_calls)
            if events is not None:
                await events.tool_calls(completion.tool_calls)
            results = await self._run_calls(completion.tool_calls, box, ctx, catalog, budget)
            added.extend(results)
            if images is not None and (carried := images.take()):
                shown.append((len(added), await images_message(carried, images.max_px)))
            if budget.tokens_exhausted:
                return await self._final_answer(
                    transcript(), added, budget, iteration, calls_made, "tokens"
                )
            if budget.remaining_seconds <= 0:
                return self._out_of_time(added, budget, iteration, calls_made)
        return await self._final_answer(
            transcript(), added, budget, settings.max_iterations, calls_made, "iterations"
        )

    async def _complete(
        self, messages: list[Message], schemas: list[dict[str, Any]] | None, budget: _TurnBudget
    ) -> Completion:
        remaining = budget.remaining_seconds
        if remaining <= 0:
            raise TurnTimeout
        events = budget.events
        try:
            async with asyncio.timeout(remaining):
                completion = await budget.llm.complete(
                    messages,
                    tools=schemas,
                    on_text=events.text if events is not None else None,
                    on_reasoning=events.reasoning if events is not None else None,
                )
        except TimeoutError:
            raise TurnTimeout from None
        budget.add(completion.usage)
        return completion

    async def _final_answer(
        self,
        messages: list[Message],
        added: list[Message],
        budget: _TurnBudget,
        iterations: int,
        calls_made: int,
        reason: str,
    ) -> AgentResult:
        log.info("turn limit reached limit=%s iterations=%d", reason, iterations)
        nudge: Message = {"role": "user", "content": FINAL_ANSWER_PROMPT}
        try:
            completion = await self._complete([*messages, nudge], None, budget)
        except TurnTimeout:
            return self._out_of_time(added, budget, iterations, calls_made)
        # Keep the nudge out of history: it was an instruction for this call only.
        text = completion.content or "I stopped before finishing: the step limit was reached."
        added.append({"role": "assistant", "content": text})
        return AgentResult(text, added, budget.usage, iterations + 1, calls_made, reason)

    def _out_of_time(
        self, added: list[Message], budget: _TurnBudget, iterations: int, calls_made: int
    ) -> AgentResult:
        text = (
            f"I ran out of time on this request (limit {budget.settings.max_turn_seconds:.0f} s) "
            "before finishing. Ask me to continue, or break it into smaller steps."
        )
        added.append({"role": "assistant", "content": text})
        return AgentResult(text, added, budget.usage, iterations, calls_made, "time")

    async def _run_calls(
        self,
        calls: Sequence[ToolCall],
        box: Toolbox,
        ctx: ToolContext,
        catalog: ToolCatalog | None,
        budget: _TurnBudget,
    ) -> list[Message]:
        async def run(call: ToolCall) -> str:
            output = await self._run_one(call, box, ctx, catalog, budget)
            if budget.events is not None:
                await budget.events.tool_result(call, output)
            return output

        # Parallel calls run concurrently; results keep the model's order.
        outputs = await asyncio.gather(*(run(call) for call in calls))
        return [
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": output}
            for call, output in zip(calls, outputs, strict=True)
        ]

    async def _run_one(
        self,
        call: ToolCall,
        box: Toolbox,
        ctx: ToolContext,
        catalog: ToolCatalog | None,
        budget: _TurnBudget,
    ) -> str:
        telemetry = self._telemetry
        if telemetry is None:
            return (await self._tool_result(call, box, ctx, catalog, budget))[0]
        started = time.monotonic()
        with telemetry.span("tool.call", **{"tool.name": call.name}) as span:
            output, outcome = await self._tool_result(call, box, ctx, catalog, budget)
            span.set("tool.outcome", outcome)
            if outcome != "ok":
                span.fail(outcome)
        telemetry.tool_call(call.name, outcome, time.monotonic() - started)
        return output

    async def _tool_result(
        self,
        call: ToolCall,
        box: Toolbox,
        ctx: ToolContext,
        catalog: ToolCatalog | None,
        budget: _TurnBudget,
    ) -> tuple[str, str]:
        spec = box.get(call.name)
        if spec is None:
            known = catalog.get(call.name) if catalog else None
            log.warning(
                "tool refused session=%s tool=%s known=%s",
                ctx.session,
                call.name,
                known is not None,
            )
            if known is not None:
                return (
                    f"error: the tool '{call.name}' is not allowed in this chat. Do not call it.",
                    "refused",
                )
            available = ", ".join(sorted(t.name for t in box.specs())) or "none"
            return (
                f"error: there is no tool named '{call.name}'. Available tools: {available}.",
                "refused",
            )

        def limit() -> float:  # after any approval wait, which uses up turn time
            return min(
                spec.timeout or budget.settings.tool_timeout, max(budget.remaining_seconds, 1)
            )

        return await run_tool(spec, call.arguments, ctx, approvals=self._approvals, timeout=limit)


async def execute_tool(
    spec: ToolSpec[Any],
    arguments: str | Mapping[str, Any],
    ctx: ToolContext,
    *,
    approvals: ApprovalGate | None,
    timeout: float | Callable[[], float],  # noqa: ASYNC109 - a callable is read after approval
) -> str:
    """Validate, ask for approval if the tool wants it, run: the one path every tool call
    takes (the agent's, and execute_code's calls from a script). Never raises for anything
    the tool does; the result is the text the model reads ("error: ..." on failure)."""
    text, _ = await run_tool(spec, arguments, ctx, approvals=approvals, timeout=timeout)
    return text


async def run_tool(
    spec: ToolSpec[Any],
    arguments: str | Mapping[str, Any],
    ctx: ToolContext,
    *,
    approvals: ApprovalGate | None,
    timeout: float | Callable[[], float],  # noqa: ASYNC109 - a callable is read after approval
) -> tuple[str, str]:
    """`execute_tool`, with the outcome for metrics: ok, error, invalid, denied, timeout."""
    name = spec.name
    try:
        raw = arguments if isinstance(arguments, Mapping) else parse_arguments(arguments)
        args = spec.args.model_validate(raw)
    except (ValueError, ValidationError) as exc:
        log.warning("bad tool arguments session=%s tool=%s", ctx.session, name)
        return f"error: invalid arguments for {name}: {describe_invalid(exc)}", "invalid"
    # Before the approval check: a call naming files people sent is weighed after them.
    arrivals_before = untrusted.before_call(spec, args, ctx)
    try:
        need = await spec.approval(args, ctx) if spec.approval is not None else None
        if need is not None and ctx.task_label:
            # The person sees which of several parallel sub-tasks wants this.
            need = dataclasses.replace(need, reason=f"{ctx.task_label}: {need.reason}")
        if need is not None and ctx.trust is not None:
            need = untrusted.mark(need, ctx.trust)
        elif need is None:
            need = await untrusted.need_after_untrusted(spec, args, ctx)
        if need is not None:
            refusal = await _ask_approval(approvals, need, name, ctx)
            if refusal is not None:
                return refusal, "denied"
    except ToolError as exc:
        return f"error: {exc}", "error"
    except Exception:
        # Fail closed: when we cannot tell whether approval is needed, nothing runs.
        log.exception("approval check failed session=%s tool=%s", ctx.session, name)
        return f"error: {name} was not run: its approval check failed. Tell the user.", "error"
    limit = timeout() if callable(timeout) else timeout
    if ctx.fence is not None:  # a run whose session was taken over runs nothing more
        await ctx.fence.check(f"tool {name}")
    output, outcome = await _run_handler(spec, args, ctx, limit)
    return untrusted.received(spec, args, ctx, output, arrivals_before=arrivals_before), outcome


async def _run_handler(
    spec: ToolSpec[Any], args: Any, ctx: ToolContext, limit: float
) -> tuple[str, str]:
    name = spec.name
    try:
        async with asyncio.timeout(limit):
            return await spec.handler(args, ctx), "ok"
    except ToolError as exc:
        return f"error: {exc}", "error"
    except TimeoutError:
        log.warning("tool timed out session=%s tool=%s", ctx.session, name)
        return f"error: {name} did not finish within {limit:g} s and was stopped.", "timeout"
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("tool crashed session=%s tool=%s", ctx.session, name)
        return f"error: {name} failed unexpectedly ({type(exc).__name__}: {exc}).", "error"


async def _ask_approval(
    approvals: ApprovalGate | None, need: ApprovalNeed, tool: str, ctx: ToolContext
) -> str | None:
    if approvals is None:
        return (
            f"error: {tool} needs a person's approval here ({need.reason}), and approvals "
            "are not available. Tell the user what you wanted to run instead."
        )
    outcome = await approvals.decide(need, tool, ctx)
    if outcome.approved:
        return None
    return f"error: not run: {outcome.message}"


def parse_arguments(raw: str) -> dict[str, Any]:
    """Decode the model's argument text; empty means no arguments."""
    if not raw or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        # Small models write Python-ish JSON (single quotes, trailing commas); accept it.
        try:
            value = lenient_json.loads(raw)
        except ValueError:
            raise ValueError(
                f"the arguments are not valid JSON ({raw[:200]!r}). Send one JSON object."
            ) from None
    if not isinstance(value, dict):
        raise ValueError("the arguments must be a JSON object with named fields.")
    return value


def describe_invalid(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:6]:
            where = ".".join(str(p) for p in err["loc"]) or "arguments"
            parts.append(f"{where}: {err['msg']}")
        return "; ".join(parts) + ". Fix the arguments and call again."
    return str(exc)


# At most this many images follow one step's results: each costs the model hundreds of
# tokens, and a tool that returns dozens is listing, not showing.
MAX_SHOWN_IMAGES = 4


async def images_message(images: list[bytes], max_px: int) -> Message:
    """The images one step's tool results carried, as the user-side message that follows
    them (tool messages take text only on OpenAI-compatible servers)."""
    lines = ["The images the tool results above returned, in order:"]
    parts: list[dict[str, Any]] = []
    for number, data in enumerate(images, 1):
        if len(parts) == MAX_SHOWN_IMAGES:
            lines.append(f"({len(images) - number + 1} more not shown)")
            break
        try:
            prepared = await asyncio.to_thread(prepare_image, data, max_px)
        except ImageError as exc:
            lines.append(f"(image {number} cannot be shown: {exc})")
            continue
        parts.append(image_part(prepared.data_url()))
    return {"role": "user", "content": [text_part("\n".join(lines)), *parts]}
