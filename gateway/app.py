"""Composition root: builds every part from Settings and wires them together.

This is the only module in `gateway/` that knows the tool modules and the
platform adapters by name; everything else receives them from here.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gateway.access import AccessPolicy
from gateway.agent import Agent
from gateway.approvals import ApprovalService
from gateway.channels import Adapter, AdapterContext, Outbox, PressRouter
from gateway.commands import register_builtin_commands
from gateway.config import Settings
from gateway.history import SessionStore
from gateway.http import HttpServer
from gateway.llm.client import LLMClient
from gateway.memory import MemoryBook
from gateway.metrics import Metrics
from gateway.router import Router
from gateway.scheduler import Scheduler
from gateway.scheduling.commands import register_schedule_commands
from gateway.store import open_store
from gateway.store.base import Store
from gateway.turns import TurnRunner
from tools.builtin import ToolServices, install_builtin_tools
from tools.registry import ToolRegistry

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)


class App:
    """The running gateway. Build with `App(settings)`, then `await start()` / `await stop()`."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: Store | None = None,
        llm_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.instance_id = uuid.uuid4().hex[:10]
        self.metrics = Metrics()
        self.store = store or open_store(settings)
        self.outbox = Outbox()
        self.presses = PressRouter()
        self.access = AccessPolicy(settings.access, self.store)
        self.sessions = SessionStore(self.store)
        self.memory = MemoryBook(self.store, settings.memory)
        self.llm = LLMClient(settings.llm, transport=llm_transport)
        self.approvals = ApprovalService(
            store=self.store,
            outbox=self.outbox,
            access=self.access,
            settings=settings.approvals,
            instance_id=self.instance_id,
        )
        self.agent = Agent(self.llm, settings.agent, approvals=self.approvals)
        self.tools = ToolRegistry()
        self.runner = TurnRunner(
            settings=settings,
            agent=self.agent,
            sessions=self.sessions,
            memory=self.memory,
            catalog=self.tools,
            outbox=self.outbox,
            metrics=self.metrics,
        )
        self.router = Router(
            store=self.store,
            runner=self.runner,
            outbox=self.outbox,
            access=self.access,
            settings=settings.router,
            sessions=settings.sessions,
            metrics=self.metrics,
        )
        register_builtin_commands(self.router, self.sessions, self.memory)
        self.approvals.install(self.router, self.presses)
        self.scheduler = Scheduler(
            settings.scheduler,
            store=self.store,
            outbox=self.outbox,
            submit=self.router.submit,
            forget_session=self.sessions.clear,
            is_admin=self.access.is_admin,
            admins=settings.access.admins,
            instance_id=self.instance_id,
            turn_timeout=settings.agent.max_turn_seconds + 30,
        )
        register_schedule_commands(self.router, self.scheduler)
        self.tool_services = ToolServices(
            settings=settings,
            store=self.store,
            memory=self.memory,
            outbox=self.outbox,
            presses=self.presses,
            add_interceptor=self.router.add_answer_interceptor,
            scheduler=self.scheduler,
            llm=self.llm,
            approvals=self.approvals,
            add_prompt_section=self.runner.add_prompt_section,
        )
        install_builtin_tools(self.tools, self.tool_services)
        self.http = (
            HttpServer(settings.http.host, settings.http.port, self.metrics)
            if settings.http.enabled
            else None
        )
        if self.http is not None:
            self.http.add_readiness_check("store", self._store_ready)
        self.adapters: list[Adapter] = []
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------

    def adapter_context(self) -> AdapterContext:
        return AdapterContext(
            submit=self.router.submit,
            press=self.presses.handle,
            store=self.store,
            access=self.access,
            metrics=self.metrics,
            http=self.http,
            commands=lambda: [(c.name, c.help) for c in self.router.commands],
            instance_id=self.instance_id,
            add_interceptor=self.router.add_interceptor,
        )

    def add_adapter(self, adapter: Adapter) -> None:
        self.adapters.append(adapter)
        self.outbox.register(adapter)

    def add_configured_adapters(self) -> list[str]:
        """Create an adapter for every platform whose settings are present; returns their names."""
        for adapter in configured_adapters(self.settings, self.adapter_context()):
            self.add_adapter(adapter)
        return [a.platform for a in self.adapters]

    async def start(self) -> None:
        await self.router.start()
        # Adapters register webhook routes before the server starts listening.
        for adapter in self.adapters:
            await adapter.start()
            log.info("adapter started platform=%s", adapter.platform)
        if self.http is not None:
            await self.http.start()
        # After the adapters: expiring a request left by a dead process edits its message.
        await self.approvals.start()
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
        await self.router.stop()
        await self.approvals.stop()
        for close in self.tool_services.closers:
            try:
                await close()
            except Exception:
                log.exception("tool service close failed")
        if self.http is not None:
            await self.http.stop()
        await self.llm.aclose()
        await self.store.close()
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


def configured_adapters(settings: Settings, ctx: AdapterContext) -> Sequence[Adapter]:
    """Adapters for the platforms configured in settings (imported only when configured)."""
    adapters: list[Adapter] = []
    if settings.telegram.token:
        from adapters.telegram import TelegramAdapter

        adapters.append(TelegramAdapter(settings.telegram, ctx))
    if settings.slack.bot_token:
        from adapters.slack import SlackAdapter

        adapters.append(SlackAdapter(settings.slack, ctx))
    if settings.discord.token:
        from adapters.discord import DiscordAdapter

        adapters.append(DiscordAdapter(settings.discord, ctx))
    return adapters
