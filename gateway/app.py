"""Composition root: builds every part from Settings and wires them together.

With gateway/cli.py, the only module in `gateway/` that imports the tools and the
platform plugins (import-linter contracts in pyproject.toml keep it so); everything
else receives them from here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
from pydantic import BaseModel

from adapters.console import ConsoleAdapter
from adapters.registry import plugin, plugins, settings_sections
from gateway import config
from gateway.access import AccessPolicy
from gateway.admission import Admission, AdmissionPipeline, Middleware, Notifier
from gateway.agent import Agent
from gateway.approvals import ApprovalService
from gateway.channels import Adapter, AdapterContext, Outbox
from gateway.commands import register_builtin_commands
from gateway.compaction import Compactor, summary_client
from gateway.config import Settings
from gateway.config.data_dir import usable_data_dir
from gateway.doctor import CheckResult, PlatformCheck
from gateway.event_loop import loop_name
from gateway.extensions import Extensions
from gateway.group_context import GroupContext
from gateway.history import SessionStore
from gateway.http import HttpServer
from gateway.integrity import signer_for
from gateway.llm.client import LLMClient
from gateway.llm.providers import ProviderPool
from gateway.loop_lag import LoopLag
from gateway.media.turn import turn_media
from gateway.memory import MemoryBook
from gateway.messages import Inbound
from gateway.metrics import Metrics
from gateway.middlewares import (
    AccessCheck,
    Commands,
    IntakeRoundTrip,
    Observe,
    RateLimit,
    SlotMiddlewares,
    Validate,
)
from gateway.otel import Tracing
from gateway.platforms import PlatformPlugin
from gateway.profiles.commands import register_profile_commands
from gateway.profiles.wiring import build_planner
from gateway.retention import RetentionSweeper
from gateway.scheduler import Scheduler
from gateway.scheduling.commands import register_schedule_commands
from gateway.session_leases import SessionLeases
from gateway.session_queue import SessionQueue
from gateway.sessions import SessionKey, key_for
from gateway.store import open_store
from gateway.store.base import Store
from gateway.telemetry import MeteredOutbox, Telemetry
from gateway.turns import TurnRunner
from gateway.web.console.site import AdminConsole
from gateway.web.console.views import ConsoleParts
from gateway.web.relay import ApprovalRelay
from gateway.web.settings import WebSettings
from tools.builtin import ToolServices, install_builtin_tools
from tools.overview import tool_overview
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)


class App:
    """The running gateway. Build with `App(settings)`, then `await start()` / `await stop()`."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: Store | None = None,
        llm_transport: httpx.AsyncBaseTransport | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.settings = settings
        self.instance_id = uuid.uuid4().hex[:10]
        self.metrics = Metrics()
        self.tracing = tracing or Tracing.from_settings(settings.otel)
        self.telemetry = Telemetry(self.metrics, self.tracing.tracer)
        usable_data_dir(settings)  # the approvals key and skills live there whatever the store
        self.store = store or open_store(settings)
        try:
            self._wire(settings, llm_transport)
        except BaseException:
            if store is None:
                self.store.abandon()  # a failed start must not keep the store locked
            raise

    def _wire(self, settings: Settings, llm_transport: httpx.AsyncBaseTransport | None) -> None:
        self.outbox: Outbox = MeteredOutbox(self.metrics)
        self.extensions = Extensions()
        self.notifier = Notifier(self.outbox.send)
        self.access = AccessPolicy(settings.access, self.store, self.extensions.access_rules)
        self.sessions = SessionStore(self.store)
        self.memory = MemoryBook(self.store, settings.memory)
        self.llm = LLMClient(settings.llm, transport=llm_transport)
        self.providers = ProviderPool(
            settings.llm, transport=llm_transport, default_client=self.llm
        )
        self.planner = build_planner(
            settings,
            store=self.store,
            pool=self.providers,
            telemetry=self.telemetry,
            say=self.notifier.say,
            is_admin=self.access.is_admin,
        )
        # Seals approvals, answers and grants in the store (raises ConfigError without a key).
        self.signer = signer_for(settings, self.metrics)
        self.approvals = ApprovalService(
            store=self.store,
            outbox=self.outbox,
            access=self.access,
            settings=settings.approvals,
            instance_id=self.instance_id,
            metrics=self.metrics,
            signer=self.signer,
        )
        self.approvals.register(self.extensions)
        self.agent = Agent(
            self.llm, settings.agent, approvals=self.approvals, telemetry=self.telemetry
        )
        self.tools = ToolRegistry()
        self.media = turn_media(settings, self.outbox, self.llm.vision)
        self.summary_llm = summary_client(settings, self.llm, llm_transport)
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
        context = GroupContext(self.store, size=20)
        self.leases = SessionLeases(
            self.store,
            self.instance_id,
            settings.router.lease_ttl,
            self.metrics,
            loop_lag=LoopLag(self.metrics, settings.router.loop_lag_limit),
            stuck_after=settings.router.lease_stuck_after,
        )
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
        )
        self.admission = AdmissionPipeline(
            start=self._admission_of,
            middlewares=self._middlewares(context),
            end=self.queue.enqueue,
            notifier=self.notifier,
            metrics=self.metrics,
            max_concurrent=settings.router.max_concurrent_intake,
        )
        register_builtin_commands(
            self.extensions, self.queue, self.sessions, self.memory, self.access
        )
        register_profile_commands(self.extensions, self.planner, self.access)
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
        )
        register_schedule_commands(self.extensions, self.scheduler)
        self.tool_services = ToolServices(
            settings=settings,
            store=self.store,
            memory=self.memory,
            outbox=self.outbox,
            extensions=self.extensions,
            scheduler=self.scheduler,
            llm=self.llm,
            approvals=self.approvals,
            submit=self.admission.submit,
            signer=self.signer,
        )
        self.tool_policy = install_builtin_tools(self.tools, self.tool_services)
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
        self._started = False

    def _console(self) -> AdminConsole | None:
        """The operator console at /admin, when `[web]` has an operator token."""
        web = getattr(self.settings, "web", None)
        if not isinstance(web, WebSettings) or not web.console_enabled or self.http is None:
            return None
        parts = ConsoleParts(
            settings=self.settings,
            store=self.store,
            instance_id=self.instance_id,
            approvals=self.approvals,
            scheduler=self.scheduler,
            sessions=self.sessions,
            metrics=self.metrics,
            adapters=self.adapters,
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
        return [
            Observe(self.access, self.store, context, router.dedupe_ttl),
            AccessCheck(self.access, self.notifier, self.metrics),
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
            refusal=self.access.refusal,
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
        log.info("starting instance=%s event_loop=%s", self.instance_id, loop_name())
        await self.queue.start()
        for start in self.tool_services.starters:  # background work (MCP servers); never blocks
            await start()
        # Adapters register webhook routes before the server starts listening.
        for adapter in self.adapters:
            await adapter.start()
            log.info("adapter started platform=%s", adapter.platform)
        if self.http is not None:
            await self.http.start()
        if self.console is not None:
            await self.console.start()
        if self.outbox.has("api"):
            self.relay.start()
        # After the adapters: expiring a request left by a dead process edits its message.
        await self.approvals.start()
        await self.retention.start()
        # Last: a job due at start is delivered through adapters that are already running.
        await self.scheduler.start()
        self._started = True

    async def stop(self) -> None:
        await self.scheduler.stop()  # first: runs in flight still have their adapters
        for adapter in reversed(self.adapters):
            try:
                await adapter.stop()
            except Exception:
                log.exception("adapter stop failed platform=%s", adapter.platform)
        await self.queue.stop()
        await self.relay.stop()
        if self.console is not None:
            await self.console.stop()
        await self.retention.stop()
        await self.approvals.stop()
        for close in self.tool_services.closers:
            try:
                await close()
            except Exception:
                log.exception("tool service close failed")
        if self.http is not None:
            await self.http.stop()
        await self.media.aclose()
        await self.providers.aclose()
        await self.planner.ledger.close()  # writes the usage still in memory
        if self.summary_llm is not self.llm:
            await self.summary_llm.aclose()
        await self.store.close()
        await self.tracing.shutdown()
        self._started = False

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
    return [
        plugin
        for plugin in plugins()
        if plugin.runs_in_gateway
        and hasattr(settings, plugin.name)
        and plugin.enabled(plugin.section(settings))
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
