"""The built-in toolset: every tool family built with the services it needs, in the order the
model sees their tools, then registered, with the layered tool policy in front of the registry.

The composition root starts the families once the gateway runs and closes them in reverse
order when it stops (also families it never started).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from gateway.approvals.seals import EntrySigner, signer_for
from gateway.config import Settings
from gateway.intake.admission import Submission
from gateway.llm.client import LLMClient
from gateway.scheduling.scheduler import Scheduler
from gateway.scheduling.targets import DeliveryTargets
from gateway.sdk.channels import Outbox
from gateway.sdk.extensions import Extensions
from gateway.sdk.families import ToolFamily
from gateway.sdk.messages import Inbound
from gateway.sdk.tooling import ApprovalGate
from gateway.sessions.history import SessionStore
from gateway.store.base import Store
from gateway.turn.memory import MemoryBook
from tools.agent.background import BackgroundTasks
from tools.agent.clarify import ClarifyService
from tools.agent.delegate import DelegateTools
from tools.agent.read_channel import ReadChannelTools
from tools.agent.todo import TodoTools
from tools.files.attachments import AttachmentFetcher, AttachmentTools
from tools.files.edit import FileTools
from tools.files.find import FindTools
from tools.files.wipe import WorkspaceWipeOffer
from tools.files.workspaces import Workspaces
from tools.mcp.install import MCPTools
from tools.media.outbound import MediaTools
from tools.memory.notes import MemoryTools
from tools.memory.search import SessionSearchTools
from tools.on_demand import OnDemand
from tools.policy import ToolPolicy, check_policy
from tools.registry import ToolRegistry
from tools.schedule.cron import CronTools
from tools.schedule.send import SendTools
from tools.shell.family import TerminalTools
from tools.skills.library import SkillTools, default_library
from tools.skills.manage import SkillManageTools
from tools.skills.store import SkillStore
from tools.web.browser import BrowserTools
from tools.web.extract import WebExtractTools
from tools.web.fetch import WebFetcher, WebFetchTools
from tools.web.netguard import AddressGuard
from tools.web.search import WebSearchTools, provider_from_settings


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
    # Home channels and other chats jobs and send_message deliver to; None: only this chat.
    targets: DeliveryTargets | None = None
    # Sub-agents run on this client and ask this gate; None: a client of their own, no gate.
    llm: LLMClient | None = None
    approvals: ApprovalGate | None = None
    # Hands a message to the gateway as if the person had sent it (MCP prompt commands);
    # None: those commands are not offered.
    submit: Callable[[Inbound], Awaitable[Submission]] | None = None
    # Seals answers in the store (clarify); None: one from the settings' key.
    signer: EntrySigner | None = None


def builtin_families(services: ToolServices, registry: ToolRegistry) -> list[ToolFamily]:
    """Every built-in family, in the order their tools are offered. `registry` is the catalog
    execute_code and delegate call other tools through. Raises ConfigError when a configured
    family cannot run (the MCP SDK is missing, the workspace is unusable)."""
    settings = services.settings
    cfg = settings.tools
    # First: the one family that refuses to build, before anything that must be closed exists.
    mcp = MCPTools(settings, submit=services.submit)
    workspaces = Workspaces(
        settings.workspace, cfg.workspace_scope, quota_bytes=cfg.workspace_quota_bytes
    )
    workspace_for = workspaces.for_context
    attachments = AttachmentFetcher(
        services.outbox,
        SessionStore(services.store),
        max_bytes=min(cfg.attachment_max_bytes, settings.media.max_download_bytes),
    )
    guard = AddressGuard(cfg.web_allow_hosts)
    fetcher = WebFetcher(guard, timeout=cfg.web_timeout, max_bytes=cfg.web_max_bytes)
    data_dir = settings.data_dir.expanduser()
    skills = default_library(data_dir)
    shared_skills = SkillStore(services.store, data_dir / "skills", settings.skills)
    background = BackgroundTasks(
        services.store,
        services.submit,
        max_per_chat=settings.delegation.max_background_per_chat,
        admins=settings.access.admins,
        beat_seconds=settings.delegation.background_heartbeat_seconds,
    )
    delegate = DelegateTools(
        llm=services.llm,
        catalog=registry,
        settings=settings,
        approvals=services.approvals,
        background=background,
    )
    return [
        WorkspaceWipeOffer(workspaces, services.store),
        FileTools(
            workspace_for,
            max_chars=cfg.max_output_chars,
            confirm_overwrite=cfg.confirm_overwrite,
            document_chars=(settings.media.document_max_chars, settings.media.document_page_chars),
        ),
        FindTools(workspace_for),
        AttachmentTools(workspace_for, attachments),
        MediaTools(settings, services.outbox, workspace_for, attachments),
        TerminalTools(
            settings,
            workspace_for,
            catalog=registry,
            approvals=services.approvals,
            workspaces=workspaces,
        ),
        WebFetchTools(fetcher, max_chars=cfg.max_output_chars),
        WebSearchTools(provider_from_settings(cfg)),
        WebExtractTools(fetcher, max_chars=cfg.max_output_chars, fetch_timeout=cfg.web_timeout),
        BrowserTools(settings, guard, workspace_for),
        MemoryTools(services.memory),
        TodoTools(services.store),
        ReadChannelTools(services.outbox, max_chars=settings.context.max_chars),
        CronTools(services.scheduler, services.targets),
        SendTools(services.targets, services.outbox),
        ClarifyService(
            services.store,
            services.outbox,
            services.signer or signer_for(settings),
            timeout=cfg.clarify_timeout,
            answer_by=cfg.clarify_answer_by,
        ),
        SkillTools(skills, shared_skills.sync),
        SkillManageTools(
            shared_skills,
            skills,
            approval=settings.skills.manage_approval,
            admins=settings.access.admins,
        ),
        delegate,
        # Summaries of the matches come from the model the sub-agents use.
        SessionSearchTools(services.store, settings.access.admins, delegate.llm),
        mcp,
    ]


def register_families(
    registry: ToolRegistry, extensions: Extensions, families: Sequence[ToolFamily]
) -> None:
    """Each family's tools into the registry, and its buttons, middlewares, commands and
    prompt sections into `extensions`, in order."""
    for family in families:
        registry.extend(family.specs())
        for source in family.sources():
            registry.add_source(source)
        family.register(extensions)


def install_policy(registry: ToolRegistry, settings: Settings) -> ToolPolicy:
    """Put the tool policy (and tools on demand) in front of the registry; raises
    ToolPolicyError (a ConfigError) when the policy names a tool, group or profile that does
    not exist."""
    check_policy(settings, registry)
    policy = ToolPolicy(settings.tools, settings.profiles)
    registry.set_filter(policy)
    if settings.tools.on_demand:
        registry.set_offer(OnDemand(settings.tools.core, registry.declared_groups))
    return policy
