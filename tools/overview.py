"""Read-only tables about the tools for the operator console: skills, MCP servers and what the
tool policy gives each platform (the console renders them; gateway/web/info.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway.sdk import Settings, ToolScope
from gateway.sdk.webkit import InfoTable
from tools.mcp.install import mcp_manager
from tools.policy import ToolPolicy
from tools.registry import ToolRegistry
from tools.skills.library import default_library
from tools.tables import short


def tool_overview(
    registry: ToolRegistry,
    policy: ToolPolicy,
    settings: Settings,
    platforms: Callable[[], Sequence[str]],
) -> Callable[[], list[InfoTable]]:
    """A source of the console's tool tables; `platforms` names the running platforms."""

    def tables() -> list[InfoTable]:
        return [
            _policy(registry, policy, settings, platforms()),
            _skills(settings),
            _mcp(registry, settings),
            _tools(registry),
        ]

    return tables


def _policy(
    registry: ToolRegistry, policy: ToolPolicy, settings: Settings, platforms: Sequence[str]
) -> InfoTable:
    rows = []
    scopes = [(p, "") for p in platforms]
    scopes += [tuple(chat.split(":", 1)) for chat in settings.tools.chat_profiles]  # type: ignore[misc]
    for platform, chat_id in scopes:
        scope = ToolScope(
            platform=platform,
            chat_id=chat_id,
            provider=settings.llm.provider_name,
            model=settings.llm.model,
        )
        allowed = registry.for_scope(scope)
        layers = ", ".join(layer.label for layer in policy.layers(scope))
        where = f"{platform}:{chat_id}" if chat_id else f"{platform} (any chat)"
        names = ", ".join(t.name for t in allowed)
        rows.append((where, layers, f"{len(allowed)} of {len(registry.all())}", names))
    return InfoTable(
        "Tool policy",
        ("where", "layers", "tools", "allowed"),
        rows,
        "What the model gets on each running platform and in chats with their own profile "
        "(tools.*; `chatgate tools list` shows the same).",
    )


def _skills(settings: Settings) -> InfoTable:
    library = default_library(settings.data_dir.expanduser())
    rows = [(s.name, s.source, short(s.description, 110)) for s in library.all()]
    return InfoTable("Skills", ("name", "source", "description"), rows, f"{len(rows)} skill(s).")


def _mcp(registry: ToolRegistry, settings: Settings) -> InfoTable:
    manager = mcp_manager(registry) if registry.sources else None
    if manager is None:
        return InfoTable(
            "MCP servers",
            ("server",),
            [],
            "None configured ([mcp.servers.<name>] in chatgate.toml).",
        )
    rows = [
        (
            status.name,
            status.transport,
            status.state.value,
            str(len(status.tools)),
            status.reason,
        )
        for status in manager.statuses()
    ]
    return InfoTable(
        "MCP servers",
        ("server", "transport", "state", "tools", "problem"),
        rows,
        f"{len(rows)} configured; tools of a server that is not connected are not offered.",
    )


def _tools(registry: ToolRegistry) -> InfoTable:
    rows = [
        (t.name, t.group, "may ask" if t.approval else "", short(t.description))
        for t in sorted(registry.all(), key=lambda t: (t.group, t.name))
    ]
    return InfoTable("All tools", ("tool", "group", "approval", "description"), rows)
