"""What a turn runs with: its profile's instructions, models (with the conversation's /model
choice first), tool scope and limits, after the budget check; and, when it ends, its usage
added to the ledger with any budget warning told in the chat."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.budgets.ledger import TurnUsage, UsageLedger
from gateway.budgets.limits import BudgetGate, Who
from gateway.config import AgentSettings, ProviderSettings, Settings
from gateway.llm.breaker import CircuitBreakers
from gateway.llm.fallback import ModelRoute, Switch
from gateway.llm.providers import ModelTarget, ProviderPool, UnknownModel
from gateway.llm.vision import Vision
from gateway.profiles.book import ProfileBook, Resolution
from gateway.profiles.choices import ModelChoices
from gateway.runtime.telemetry import Telemetry
from gateway.sdk.messages import Inbound
from gateway.sdk.tooling import SpunOff, ToolScope
from gateway.sessions.key import SessionKey
from gateway.store.base import StoreUnavailable

log = logging.getLogger(__name__)

# Says one line in the chat a message came from (gateway.intake.admission.Notifier.say).
Say = Callable[[Inbound, str], Awaitable[Any]]


class TurnRefused(Exception):
    """The turn may not run (a budget is used up); the message says why and until when."""

    def __init__(self, message: str, *, profile: str) -> None:
        super().__init__(message)
        self.user_message = message
        self.profile = profile


@dataclass
class TurnPlan:
    inbound: Inbound
    resolution: Resolution
    instructions: str  # added to the built-in system prompt when a session starts
    route: ModelRoute
    scope: ToolScope
    limits: AgentSettings
    who: Who
    _settle: Callable[[TurnPlan], Awaitable[None]] = field(repr=False)

    @property
    def profile(self) -> str:
        return self.resolution.name

    @property
    def reply_to_message(self) -> bool:
        return self.resolution.profile.reply_to_message

    @property
    def model_settings(self) -> ProviderSettings:
        """The first model's settings, with the profile's `stream` choice."""
        return self.route.first_settings(self.resolution.profile.stream)

    @property
    def vision(self) -> Vision:
        """Whether the turn's first model takes images (gateway/llm/vision.py)."""
        return self.route.vision

    def spin_off(self) -> SpunOff:
        """Models for work that outlives the turn (a background task): the turn's chain, with
        usage of its own that `settle` records against the same person, chat and profile."""
        plan = dataclasses.replace(self, route=self.route.fresh())
        return SpunOff(plan.route, plan.settle)

    async def settle(self) -> None:
        """Record what the turn used and tell the chat about budgets; never raises."""
        try:
            await self._settle(self)
        except Exception:
            log.exception("turn usage not recorded chat=%s", self.inbound.chat.address)


class TurnPlanner:
    def __init__(
        self,
        settings: Settings,
        *,
        book: ProfileBook,
        choices: ModelChoices,
        pool: ProviderPool,
        breakers: CircuitBreakers,
        ledger: UsageLedger,
        gate: BudgetGate,
        telemetry: Telemetry,
        say: Say,
    ) -> None:
        self._agent = settings.agent
        self.book = book
        self.choices = choices
        self.pool = pool
        self.breakers = breakers
        self.ledger = ledger
        self.gate = gate
        self._telemetry = telemetry
        self._say = say

    # -- which models --------------------------------------------------------------------

    def chain(self, resolution: Resolution, choice: str | None = None) -> list[ModelTarget]:
        """The profile's model, then its fallbacks; a valid /model choice goes first."""
        profile = resolution.profile
        chain = [self.pool.target(profile.provider, profile.model)]
        chain += [self.pool.target(ref) for ref in profile.fallback]
        if choice:
            chosen = self._parse(choice)
            if chosen is not None and chosen in self.models(resolution):
                chain = [chosen, *(t for t in chain if t != chosen)]
        return list(dict.fromkeys(chain))

    def models(self, resolution: Resolution) -> list[ModelTarget]:
        """What /model may switch to under this profile."""
        profile = resolution.profile
        if profile.models:
            return list(dict.fromkeys(self.pool.target(ref) for ref in profile.models))
        return self.chain(resolution)

    def _parse(self, ref: str) -> ModelTarget | None:
        try:
            return self.pool.target(ref)
        except UnknownModel:
            return None

    # -- one turn ------------------------------------------------------------------------

    def instructions(self, inbound: Inbound) -> str:
        """The prompt instructions of the profile that applies to a message."""
        return self.book.prompt(self.book.resolve(inbound.chat, inbound.sender, inbound.profile))

    async def plan(self, inbound: Inbound, session: SessionKey) -> TurnPlan:
        """The plan for a turn; raises TurnRefused when a budget is used up."""
        resolution = self.book.resolve(inbound.chat, inbound.sender, inbound.profile)
        who = Who(inbound.sender, inbound.chat, inbound.job_id)
        refusal = await self.gate.check(who)
        if refusal is not None:
            self._telemetry.metrics.inc("budget_refusals_total", scope=refusal.dimension)
            raise TurnRefused(refusal.message, profile=resolution.name)
        choice = None
        if len(self.models(resolution)) > 1:  # only then can a choice matter
            choice = await self.choices.get(session)
        chain = self.chain(resolution, choice)
        profile = resolution.profile

        async def tell(switch: Switch) -> None:
            await self._say(inbound, switch.note())

        route = ModelRoute(
            self.pool,
            self.breakers,
            chain,
            telemetry=self._telemetry,
            temperature=profile.temperature,
            max_tokens=profile.max_tokens,
            stream=profile.stream,
            on_switch=tell,
        )
        first = self.pool.info(chain[0])
        scope = ToolScope(
            platform=inbound.chat.platform,
            chat_id=inbound.chat.chat_id,
            provider=first.policy_name,
            model=first.target.model,
            profile=resolution.name if self.book.names else "",
        )
        overrides = {
            key: value
            for key in ("max_iterations", "max_turn_seconds", "max_tokens_per_turn")
            if (value := getattr(profile, key)) is not None
        }
        return TurnPlan(
            inbound=inbound,
            resolution=resolution,
            instructions=self.book.prompt(resolution),
            route=route,
            scope=scope,
            limits=self._agent.model_copy(update=overrides) if overrides else self._agent,
            who=who,
            _settle=self._settle,
        )

    async def _settle(self, plan: TurnPlan) -> None:
        route = plan.route
        if not route.usage:
            return
        usage = TurnUsage(
            user=plan.who.user.address,
            chat=f"{plan.inbound.chat.platform}:{plan.inbound.chat.chat_id}",
            profile=plan.profile,
            job=plan.who.job,
            by_model={str(t): u for t, u in route.usage.items()},
            cost_by_model={str(t): self.pool.info(t).cost(u) for t, u in route.usage.items()},
        )
        try:
            totals = await self.ledger.record(usage, exact=self.gate.exact(plan.who))
        except StoreUnavailable as exc:
            log.error("turn usage not recorded chat=%s error=%s", usage.chat, exc)
            return
        for line in await self.gate.notices(plan.who, totals):
            self._telemetry.metrics.inc("budget_warnings_total")
            await self._say(plan.inbound, line)
