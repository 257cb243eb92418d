"""The built-in toolset: builds every tool with the services it needs, registers it, and puts
the layered tool policy in front of the registry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from gateway.approvals.seals import EntrySigner, signer_for
from gateway.config import Settings
from gateway.intake.admission import Submission
from gateway.llm.client import LLMClient
from gateway.runtime.secrets import secret_values
from gateway.scheduling.scheduler import Scheduler
from gateway.sdk.channels import Outbox
from gateway.sdk.extensions import Extensions
from gateway.sdk.messages import Inbound
from gateway.sdk.tooling import ApprovalGate
from gateway.sessions.history import SessionStore
from gateway.store.base import Store
from gateway.turn.memory import MemoryBook
from tools.agent.clarify import ClarifyService
from tools.agent.delegate import subagent_tools
from tools.agent.todo import todo_tools
from tools.files.attachments import AttachmentFetcher, attachment_tools
from tools.files.edit import file_tools
from tools.files.find import find_tools
from tools.files.wipe import WorkspaceWipeOffer
from tools.files.workspaces import Workspaces
from tools.mcp.install import install_mcp_tools
from tools.media.outbound import media_tools
from tools.memory.notes import memory_tools
from tools.memory.search import session_search_tools
from tools.on_demand import OnDemand
from tools.policy import ToolPolicy, check_policy
from tools.registry import ToolRegistry
from tools.schedule.cron import cron_tools
from tools.shell.code import code_tools
from tools.shell.terminal.factory import build_backend
from tools.shell.tool import gateway_paths, shell_tools
from tools.skills.library import default_library, live_index, skill_tools
from tools.skills.manage import skill_manage_tools
from tools.skills.store import SkillStore
from tools.web.browser import browser_tool_specs
from tools.web.extract import extract_available, web_extract_tools
from tools.web.fetch import WebFetcher, web_tools
from tools.web.netguard import AddressGuard
from tools.web.search import provider_from_settings, web_search_tools


@dataclass(frozen=True)
class ToolServices:
    """Long-lived services tools are built with (per-call identity comes in ToolContext)."""

    settings: Settings
    store: Store
    memory: MemoryBook
    outbox: Outbox
    # Where tools register their buttons, admission middlewares and prompt sections.
    extensions: Extensions
    scheduler: Scheduler | None = None  # None: the cron tools say scheduling is unavailable
    # Sub-agents run on this client and ask this gate; None: a client of their own, no gate.
    llm: LLMClient | None = None
    approvals: ApprovalGate | None = None
    # Filled by install_builtin_tools: call each on shutdown (background listeners).
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # Hands a message to the gateway as if the person had sent it (MCP prompt commands);
    # None: those commands are not offered.
    submit: Callable[[Inbound], Awaitable[Submission]] | None = None
    # Filled by install_builtin_tools: call each once the gateway starts; each returns at once
    # and works in the background (MCP servers connecting).
    starters: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # Seals answers in the store (clarify); None: one from the settings' key.
    signer: EntrySigner | None = None


def install_builtin_tools(registry: ToolRegistry, services: ToolServices) -> ToolPolicy:
    """Register every built-in tool and the policy; raises ToolPolicyError (a ConfigError)
    when the policy in settings names a tool, group or profile that does not exist."""
    settings = services.settings
    cfg = settings.tools
    workspaces = Workspaces(settings.workspace, cfg.workspace_scope)
    workspace_for = workspaces.for_context
    WorkspaceWipeOffer(workspaces, services.store).register(services.extensions)
    registry.extend(
        file_tools(
            workspace_for, max_chars=cfg.max_output_chars, confirm_overwrite=cfg.confirm_overwrite
        )
    )
    registry.extend(find_tools(workspace_for))
    attachments = AttachmentFetcher(
        services.outbox,
        SessionStore(services.store),
        max_bytes=min(cfg.attachment_max_bytes, settings.media.max_download_bytes),
    )
    registry.extend(attachment_tools(workspace_for, attachments))
    registry.extend(
        media_tools(settings, services.outbox, workspace_for, attachments, services.closers)
    )
    terminal = build_backend(settings)
    services.closers.append(terminal.close)
    registry.extend(
        shell_tools(
            workspace_for,
            cfg,
            terminal.backend,
            secrets=lambda: secret_values(settings),
            protected=gateway_paths(settings),
            workspace_root=settings.workspace,
        )
    )
    registry.extend(
        code_tools(
            workspace_for,
            settings,
            terminal.backend,
            catalog=registry,
            approvals=services.approvals,
            secrets=lambda: secret_values(settings),
        )
    )
    guard = AddressGuard(cfg.web_allow_hosts)
    fetcher = WebFetcher(guard, timeout=cfg.web_timeout, max_bytes=cfg.web_max_bytes)
    registry.extend(web_tools(fetcher, max_chars=cfg.max_output_chars))
    registry.extend(web_search_tools(provider_from_settings(cfg)))
    if extract_available():
        registry.extend(
            web_extract_tools(
                fetcher, max_chars=cfg.max_output_chars, fetch_timeout=cfg.web_timeout
            )
        )
    registry.extend(browser_tool_specs(settings, guard, workspace_for, services.closers))
    registry.extend(memory_tools(services.memory))
    registry.extend(todo_tools(services.store))
    registry.extend(cron_tools(services.scheduler))
    clarify = ClarifyService(
        services.store,
        services.outbox,
        services.signer or signer_for(settings),
        timeout=cfg.clarify_timeout,
        answer_by=cfg.clarify_answer_by,
    )
    clarify.register(services.extensions)
    services.closers.append(clarify.close)
    registry.extend(clarify.tools())

    data_dir = settings.data_dir.expanduser()
    skills = default_library(data_dir)
    shared = SkillStore(services.store, data_dir / "skills", settings.skills)
    registry.extend(skill_tools(skills, shared.sync))
    registry.extend(
        skill_manage_tools(
            shared,
            skills,
            approval=settings.skills.manage_approval,
            admins=settings.access.admins,
        )
    )
    services.extensions.add_prompt_section(live_index(skills, shared.sync))
    llm = services.llm
    if llm is None:
        llm = LLMClient(settings.llm)
        services.closers.append(llm.aclose)
    registry.extend(
        subagent_tools(llm=llm, catalog=registry, settings=settings, approvals=services.approvals)
    )
    registry.extend(session_search_tools(services.store, settings.access.admins, llm))

    install_mcp_tools(
        registry,
        settings,
        starters=services.starters,
        closers=services.closers,
        extensions=services.extensions,
        submit=services.submit,
    )

    check_policy(settings, registry)
    policy = ToolPolicy(cfg, settings.profiles)
    registry.set_filter(policy)
    if cfg.on_demand:
        registry.set_offer(OnDemand(cfg.core, registry.declared_groups))
    return policy
