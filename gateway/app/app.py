"""Composition root: builds every part from Settings and wires them together.

With gateway/app/cli.py, the only module in `gateway/` that imports the tools and the
platform plugins (import-linter contracts in pyproject.toml keep it so); everything
else receives them from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel

from adapters.console import ConsoleAdapter
from adapters.registry import plugin, plugins_named, settings_sections
from gateway import config
from gateway.app.doctor import CheckResult, PlatformCheck
from gateway.app.tool_wiring import (
    ToolServices,
    builtin_families,
    install_policy,
    register_families,
)
from gateway.approvals.grants import GrantBook
from gateway.approvals.seals import signer_for
from gateway.approvals.service import ApprovalService
from gateway.config import Settings
from gateway.config.data_dir import usable_data_dir
from gateway.intake.access import AccessPolicy
from gateway.intake.admission import Admission, AdmissionPipeline, Middleware, Notifier
from gateway.intake.commands import register_builtin_commands
from gateway.intake.group_context import GroupContext
from gateway.intake.load import IntakeLoad
from gateway.intake.middlewares import (
    AccessCheck,
    Commands,
    IntakeRoundTrip,
    Observe,
    RateLimit,
    SlotMiddlewares,
    Validate,
)
from gateway.intake.pairing import Pairing, PairingBook
from gateway.llm.client import LLMClient
from gateway.llm.providers import ProviderPool
from gateway.media.turn import turn_media
from gateway.profiles.commands import register_profile_commands
from gateway.profiles.wiring import build_planner
from gateway.runtime.event_loop import loop_name
from gateway.runtime.http import HttpServer
from gateway.runtime.loop_lag import LoopLag
from gateway.runtime.metrics import Metrics
from gateway.runtime.otel import Tracing
from gateway.runtime.telemetry import MeteredOutbox, Telemetry
from gateway.scheduling.commands import register_schedule_commands
from gateway.scheduling.scheduler import Scheduler
from gateway.scheduling.targets import DeliveryTargets, budget_check
from gateway.sdk.channels import Adapter, AdapterContext, Outbox
from gateway.sdk.extensions import Extensions
from gateway.sdk.messages import Inbound
from gateway.sdk.platforms import PlatformPlugin
from gateway.sessions.compaction import Compactor, summary_client
from gateway.sessions.history import SessionStore
from gateway.sessions.key import SessionKey, key_for
from gateway.sessions.leases import SessionLeases
from gateway.sessions.queue import SessionQueue
from gateway.sessions.retention import RetentionSweeper
from gateway.store import store_for
from gateway.store.base import Store
from gateway.turn.agent import Agent
from gateway.turn.memory import MemoryBook
from gateway.turn.runner import TurnRunner
from gateway.web.relay import ApprovalRelay
from gateway.web.settings import WebSettings
from tools.overview import tool_overview
from tools.registry import ToolRegistry

if TYPE_CHECKING:
    from gateway.web.console.site import AdminConsole

log = logging.getLogger(__name__)


class App:
    """The gateway. Building it opens nothing (no store, no lock, no connection); `start()`
    opens each part and puts its stop on a stack, and `stop()` unwinds that stack. A start
    that fails unwinds what it had opened before it raises."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: Store | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.settings = settings
        self.instance_id = uuid.uuid4().hex[:10]
        self.metrics = Metrics()
        self.tracing = tracing or Tracing.from_settings(settings.otel)
        self.telemetry = Telemetry(self.metrics, self.tracing.tracer)
        usable_data_dir(settings)  # the approvals key and skills live there whatever the store
        self.store = store or store_for(settings)
        self._stack: contextlib.AsyncExitStack | None = None
        self._wire(settings)

    def _wire(self, settings: Settings) -> None:
        self.outbox: Outbox = MeteredOutbox(self.metrics)
        self.extensions = Extensions()
        self.notifier = Notifier(self.outbox.send)
        self.access = AccessPolicy(settings.access, self.store, self.extensions.access_rules)
        # Seals approvals, answers and grants in the store (raises ConfigError without a key).
        self.signer = signer_for(settings, self.metrics)
        self.grants = GrantBook(self.store, self.signer)
        # A session that ends (/new, /forget, retention) ends its standing approvals with it.
        self.sessions = SessionStore(self.store, ended=self.grants.end_session)
        self.memory = MemoryBook(self.store, settings.memory)
        self.llm = LLMClient(settings.llm)
        self.providers = ProviderPool(settings.llm, default_client=self.llm)
        self.planner = build_planner(
            settings,
            store=self.store,
            pool=self.providers,
            telemetry=self.telemetry,
            say=self.notifier.say,
            is_admin=self.access.is_admin,
        )
        self.approvals = ApprovalService(
            store=self.store,
            outbox=self.outbox,
            access=self.access,
            settings=settings.approvals,
            instance_id=self.instance_id,
            metrics=self.metrics,
            signer=self.signer,
            grants=self.grants,
        )
        self.approvals.register(self.extensions)
        codes_last = settings.access.pairing_code_minutes * 60
        self.pairing = Pairing(
            book=PairingBook(self.store, self.signer, codes_last),
            outbox=self.outbox,
            access=self.access,
            settings=settings.access,
        )
        self.pairing.register(self.extensions)
        self.agent = Agent(
            self.llm, settings.agent, approvals=self.approvals, telemetry=self.telemetry
        )
        self.tools = ToolRegistry()
        self.media = turn_media(settings, self.outbox, self.llm.vision)
        self.summary_llm = summary_client(settings, self.llm)
        self.runner = TurnRunner(
            settings=settings,
            agent=self.agent,
            sessions=self.sessions,
            memory=self.memory,
            catalog=self.tools,
            outbox=self.outbox,
            metrics=self.metrics,
            planner=self.planner,
            telemetry=self.telemetry,
            media=self.media,
            prompt_sections=self.extensions.prompt_sections,
            compactor=Compactor(
                self.summary_llm,
                self.memory,
                settings.agent.history_token_budget,
                timeout=min(90.0, settings.agent.max_turn_seconds / 4),
            ),
        )
        self.retention = RetentionSweeper(
            self.store,
            self.sessions,
            retention_days=settings.history.retention_days,
            instance_id=self.instance_id,
        )
        context = GroupContext(
            self.store, size=settings.context.max_messages, chars=settings.context.max_chars
        )
        self.leases = SessionLeases(
            self.store,
            self.instance_id,
            settings.router.lease_ttl,
            self.metrics,
            loop_lag=LoopLag(self.metrics, settings.router.loop_lag_limit),
            stuck_after=settings.router.lease_stuck_after,
        )
        intake_load = self.intake_load = IntakeLoad()  # turns give way to intake under a burst
        self.queue = SessionQueue(
            store=self.store,
            runner=self.runner,
            leases=self.leases,
            context=context,
            notifier=self.notifier,
            settings=settings.router,
            metrics=self.metrics,
            instance_id=self.instance_id,
            turn_timeout=settings.agent.max_turn_seconds + 60,
            rate_limit=settings.access.rate_limit_per_minute,
            intake_load=intake_load,
        )
        self.admission = AdmissionPipeline(
            start=self._admission_of,
            middlewares=self._middlewares(context),
            end=self.queue.enqueue,
            notifier=self.notifier,
            metrics=self.metrics,
            max_concurrent=settings.router.max_concurrent_intake,
            load=intake_load,
        )
        register_builtin_commands(
            self.extensions, self.queue, self.sessions, self.memory, self.access
        )
        register_profile_commands(self.extensions, self.planner, self.access)
        self.targets = DeliveryTargets(
            self.store,
            self.access,
            self.outbox,
            admins=settings.access.admins,
            budget=budget_check(self.planner.gate),
        )
        self.targets.register(self.extensions)
        self.scheduler = Scheduler(
            settings.scheduler,
            store=self.store,
            outbox=self.outbox,
            submit=self.admission.submit,
            forget_session=self.sessions.clear,
            is_admin=self.access.is_admin,
            admins=settings.access.admins,
            instance_id=self.instance_id,
            turn_timeout=settings.agent.max_turn_seconds + 30,
            metrics=self.metrics,
            check_target=self.targets.job_refusal,
        )
        register_schedule_commands(self.extensions, self.scheduler)
        self.tool_services = ToolServices(
            settings=settings,
            store=self.store,
            memory=self.memory,
            outbox=self.outbox,
            extensions=self.extensions,
            scheduler=self.scheduler,
            targets=self.targets,
            llm=self.llm,
            approvals=self.approvals,
            submit=self.admission.submit,
            signer=self.signer,
        )
        self.tool_families = builtin_families(self.tool_services, self.tools)
        register_families(self.tools, self.extensions, self.tool_families)
        self.tool_policy = install_policy(self.tools, settings)
        self.http = (
            HttpServer(settings.http.host, settings.http.port, self.metrics)
            if settings.http.enabled
            else None
        )
        if self.http is not None:
            self.http.add_readiness_check("store", self._store_ready)
        self.adapters: list[Adapter] = []
        # Approvals from API sessions go to the admins too (started when the API runs).
        self.relay = ApprovalRelay(
            store=self.store,
            outbox=self.outbox,
            approvals=self.approvals,
            access=self.access,
            admins=settings.access.admins,
        )
        self.relay.register(self.extensions)
        self.console = self._console()
        _check_api_models(settings)

    def _console(self) -> AdminConsole | None:
        """The operator console at /admin, when `[web]` has an operator token."""
        web = getattr(self.settings, "web", None)
        if not isinstance(web, WebSettings) or not web.console_enabled or self.http is None:
            return None
        # Imported here: a gateway without an operator token never loads the console.
        from gateway.web.console.site import AdminConsole
        from gateway.web.console.views import ConsoleParts

        parts = ConsoleParts(
            settings=self.settings,
            store=self.store,
            instance_id=self.instance_id,
            approvals=self.approvals,
            pairing=self.pairing,
            scheduler=self.scheduler,
            sessions=self.sessions,
            metrics=self.metrics,
            adapters=self.adapters,
            signer=self.signer,
            info=tool_overview(
                self.tools,
                self.tool_policy,
                self.settings,
                lambda: [a.platform for a in self.adapters],
            ),
        )
        console = AdminConsole(
            parts, web, queue=self.queue, memory=self.memory, files=self.extensions.chat_files
        )
        console.add_routes(self.http)
        return console

    def _middlewares(self, context: GroupContext) -> list[Middleware]:
        """The admission chain, in order (ARCHITECTURE.md draws it)."""
        router = self.settings.router
        pairing = self.pairing if self.access.pairs else None
        return [
            Observe(self.access, self.store, context, router.dedupe_ttl),
            AccessCheck(self.access, self.notifier, self.metrics, pairing),
            Validate(router, self.notifier),
            RateLimit(self.access, self.notifier, self.metrics),
            IntakeRoundTrip(
                store=self.store,
                access=self.access,
                queue=self.queue,
                notifier=self.notifier,
                dedupe_ttl=router.dedupe_ttl,
                metrics=self.metrics,
            ),
            Commands(self.extensions, self.notifier, self.metrics),
            SlotMiddlewares(self.extensions, "questions", running_here=self.queue.is_running),
            SlotMiddlewares(self.extensions, "fallback"),
        ]

    def _admission_of(self, inbound: Inbound) -> Admission:
        return Admission(inbound, self.session_key(inbound), uuid.uuid4().hex[:12])

    def session_key(self, inbound: Inbound) -> SessionKey:
        if inbound.session is not None:
            return SessionKey.parse(inbound.session)
        return key_for(inbound, self.settings.sessions.for_platform(inbound.chat.platform))

    # -- lifecycle -----------------------------------------------------------------------

    def adapter_context(self) -> AdapterContext:
        return AdapterContext(
            submit=self.admission.submit,
            press=self.extensions.press,
            store=self.store,
            extensions=self.extensions,
            metrics=self.metrics,
            http=self.http,
            commands=lambda: [(c.name, c.help) for c in self.extensions.commands],
            instance_id=self.instance_id,
            signer=self.signer,
            refusal=self.access.refusal,
            context_messages=self.settings.context.max_messages,
            context_chars=self.settings.context.max_chars,
            intake_load=self.intake_load,
        )

    def add_adapter(self, adapter: Adapter) -> None:
        self.adapters.append(adapter)
        self.outbox.register(adapter)

    def add_terminal_adapter(self) -> ConsoleAdapter:
        """The console platform (`chatgate chat` / `ask`), from the `[console]` settings."""
        adapter = terminal_adapter(self.settings, self.adapter_context())
        assert isinstance(adapter, ConsoleAdapter)
        self.add_adapter(adapter)
        return adapter

    def add_configured_adapters(self) -> list[str]:
        """Create an adapter for every platform whose settings are present; returns their names."""
        for adapter in configured_adapters(self.settings, self.adapter_context()):
            self.add_adapter(adapter)
        return [a.platform for a in self.adapters]

    async def start(self) -> None:
        if self._stack is not None:
            raise RuntimeError("the gateway is already started")
        log.info("starting instance=%s event_loop=%s", self.instance_id, loop_name())
        async with contextlib.AsyncExitStack() as stack:
            await self._open(stack)
            self._stack = stack.pop_all()

    async def _open(self, stack: contextlib.AsyncExitStack) -> None:
        """Open every part, each stop pushed as its part opens: the stack unwinds in reverse."""
        self.tracing.start()
        stack.push_async_callback(self.tracing.shutdown)
        await self.store.open()
        stack.push_async_callback(self.store.close)
        # The LLM clients connect on first use; the ledger writes the usage still in memory.
        if self.summary_llm is not self.llm:
            stack.push_async_callback(self.summary_llm.aclose)
        stack.push_async_callback(self.planner.ledger.close)
        stack.push_async_callback(self.providers.aclose)  # the main client among them
        stack.push_async_callback(self.media.aclose)
        # These serve the adapters and the turns, so they stop after both, though they start
        # after the adapters (webhook routes come first; expiring an approval edits its
        # message through an adapter): their stops go on the stack first. Each is safe to
        # stop unstarted.
        if self.http is not None:
            stack.push_async_callback(self.http.stop)
        stack.push_async_callback(self._close_tools)
        stack.push_async_callback(self.approvals.stop)
        stack.push_async_callback(self.retention.stop)
        if self.console is not None:
            stack.push_async_callback(self.console.stop)
        stack.push_async_callback(self.relay.stop)
        await self.queue.start()
        stack.push_async_callback(self.queue.stop)
        await self._start_tools()
        for adapter in self.adapters:
            # Pushed first: a start that fails halfway (after getMe, say) has opened clients
            # that its stop closes; an adapter's stop is safe on a half-started adapter.
            stack.push_async_callback(
                _logged(adapter.stop, f"adapter stop failed platform={adapter.platform}")
            )
            await adapter.start()
            log.info("adapter started platform=%s", adapter.platform)
        if self.http is not None:
            await self.http.start()
        if self.console is not None:
            await self.console.start()
        if self.outbox.has("api"):
            self.relay.start()
        await self.approvals.start()
        await self.retention.start()
        # Last: a job due at start is delivered through adapters that are already running;
        # first to stop, so runs in flight still have their adapters.
        await self.scheduler.start()
        stack.push_async_callback(self.scheduler.stop)

    async def _start_tools(self) -> None:
        """The tool families' background work (MCP servers connecting); returns at once."""
        for family in self.tool_families:
            await family.start()

    async def _close_tools(self) -> None:
        """Each family closes what it opened, in reverse order; a failure is logged and the
        rest still close."""
        for family in reversed(self.tool_families):
            await _logged(family.close, f"tool family close failed family={family.name}")()

    async def stop(self) -> None:
        """Stop what `start()` opened, in reverse order; nothing when it is not started."""
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> App:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _store_ready(self) -> str | None:
        try:
            await asyncio.wait_for(self.store.ping(), timeout=2)
        except Exception as exc:
            return f"store unreachable: {type(exc).__name__}"
        return None


def _logged(stop: Callable[[], Awaitable[None]], what: str) -> Callable[[], Awaitable[None]]:
    """`stop`, with a failure logged instead of raised: the parts after it still stop."""

    async def logged() -> None:
        try:
            await stop()
        except Exception:
            log.exception(what)

    return logged


def _check_api_models(settings: Settings) -> None:
    """Every API model name must run a profile that exists (`api.models` -> `[profiles.*]`)."""
    models: dict[str, str] = getattr(getattr(settings, "api", None), "models", {})
    for model, profile in models.items():
        if profile not in settings.profiles.named:
            known = ", ".join(sorted(settings.profiles.named)) or "none is defined"
            raise config.ConfigError(
                [f"api.models.{model}: there is no profile {profile!r} ({known})"]
            )


def load_settings(path: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Settings with every platform's section (`[telegram]`, `CHATGATE_TELEGRAM__TOKEN` ...)."""
    return config.load_settings(path, sections=settings_sections(), **overrides)


def configured_platforms(settings: Settings) -> list[PlatformPlugin[Any]]:
    """The platforms `chatgate run` starts: those configured in these settings."""
    # Only the platforms with a section in these settings: `chatgate run` builds those the
    # config names (gateway/app/cli.py), and the others' plugins stay unimported.
    return [
        plugin
        for plugin in plugins_named(type(settings).model_fields)
        if plugin.runs_in_gateway and plugin.enabled(plugin.section(settings))
    ]


def configured_adapters(settings: Settings, ctx: AdapterContext) -> Sequence[Adapter]:
    """Adapters for the platforms configured in settings; raises PlatformUnavailable when a
    configured platform's SDK is not installed."""
    return [plugin.create(settings, ctx) for plugin in configured_platforms(settings)]


def terminal_adapter(settings: Settings, ctx: AdapterContext) -> Adapter:
    """The console platform, for `chatgate chat` and `ask`."""
    return plugin("console").create(settings, ctx)


def platform_checks(settings: Settings) -> list[PlatformCheck]:
    """`chatgate doctor`'s check of each configured platform (its SDK, then its API)."""
    checks: list[PlatformCheck] = []
    for found in configured_platforms(settings):
        checks.append(functools.partial(_check_platform, found, found.section(settings)))
    return checks


async def _check_platform(
    found: PlatformPlugin[Any], section: BaseModel, http: httpx.AsyncClient
) -> CheckResult:
    missing = found.missing()
    if missing:
        return CheckResult(
            found.name,
            False,
            f"its library ({', '.join(missing)}) is not installed",
            f"pip install 'chatgate[{found.extra or found.name}]'",
        )
    if found.check is None:
        return CheckResult(found.name, True, "configured")
    return await found.check(section, http)
