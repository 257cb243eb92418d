"""`chatgate tools list | groups | show`: what the agent gets where, without starting the gateway.

The registry is built from Settings with throwaway services (an embedded store in a
temporary directory, no adapters), so the output is exactly the running gateway's toolset.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.tables import print_table, short

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.sdk.families import ToolFamily
    from tools.policy import ToolPolicy
    from tools.registry import ToolRegistry

EXIT_OK, EXIT_CONFIG = 0, 2


def register(subparsers: Any) -> None:
    """Add `tools` to the `chatgate` argument parser (called from gateway/app/cli.py)."""
    tools = subparsers.add_parser("tools", help="show the agent's tools, groups and schemas")
    sub = tools.add_subparsers(dest="tools_command", required=True)

    ls = sub.add_parser("list", help="the tools the model gets in a scope, after the policy")
    ls.add_argument(
        "--allow",
        action="append",
        metavar="NAMES",
        help="replace tools.allow (tool, group:x or *; repeat or comma-separate)",
    )
    ls.add_argument("--deny", action="append", metavar="NAMES", help="replace tools.deny")
    ls.add_argument("--platform", default="console", help="platform (default: console)")
    ls.add_argument("--chat", default="", help="chat id, or platform:chat_id")
    ls.add_argument("--provider", help="LLM provider (default: from llm settings)")
    ls.add_argument("--model", help="LLM model (default: llm.model)")
    ls.add_argument("--subagent", action="store_true", help="as a sub-agent sees them")
    ls.add_argument("--profile", default="", help="under this agent profile ([profiles.NAME])")
    ls.add_argument("--all", action="store_true", help="also list removed tools and why")
    ls.set_defaults(func=cmd_list)

    sub.add_parser("groups", help="toolsets and groups with their tools").set_defaults(
        func=cmd_groups
    )

    show = sub.add_parser("show", help="print the JSON schema the model gets for a tool")
    show.add_argument("name")
    show.set_defaults(func=cmd_show)


@contextlib.contextmanager
def offline_registry(
    settings: Settings, *, mcp_servers: bool = False
) -> Iterator[tuple[ToolRegistry, ToolPolicy]]:
    """The gateway's tool registry and policy, built without live services. With `mcp_servers`
    the MCP servers are started too (until each connected or failed once), so their tools are
    listed; a server that is not connected is named on stderr."""
    import asyncio
    import tempfile

    from gateway.app.tool_wiring import (
        ToolServices,
        builtin_families,
        install_policy,
        register_families,
    )
    from gateway.sdk.channels import Outbox
    from gateway.sdk.extensions import Extensions
    from gateway.store.embedded import EmbeddedStore
    from gateway.turn.memory import MemoryBook
    from tools.mcp.install import start_servers
    from tools.registry import ToolRegistry

    with (
        tempfile.TemporaryDirectory(prefix="chatgate-tools-") as tmp,
        asyncio.Runner() as runner,
    ):
        store = EmbeddedStore(Path(tmp))
        registry = ToolRegistry()
        families: list[ToolFamily] = []
        try:
            services = ToolServices(
                settings=settings,
                store=store,
                memory=MemoryBook(store, settings.memory),
                outbox=Outbox(),
                extensions=Extensions(),
            )
            families = builtin_families(services, registry)
            register_families(registry, services.extensions, families)
            policy = install_policy(registry, settings)
            if mcp_servers:
                for problem in runner.run(start_servers(registry)):
                    print(f"note: {problem}", file=sys.stderr)
            yield registry, policy
        finally:
            for family in reversed(families):  # the MCP servers too, when they were started
                runner.run(family.close())
            runner.run(store.close())


def cmd_list(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.sdk.tooling import ToolScope

    overrides: dict[str, list[str]] = {}
    if args.allow is not None:
        overrides["allow"] = _names(args.allow)
    if args.deny is not None:
        overrides["deny"] = _names(args.deny)
    if overrides:
        tools_cfg = settings.tools.model_copy(update=overrides)
        settings = settings.model_copy(update={"tools": tools_cfg})
    platform, chat_id = args.platform, args.chat
    if ":" in chat_id:
        platform, chat_id = chat_id.split(":", 1)
    scope = ToolScope(
        platform=platform,
        chat_id=chat_id,
        provider=args.provider if args.provider is not None else settings.llm.provider_name,
        model=args.model if args.model is not None else settings.llm.model,
        is_subagent=args.subagent,
        profile=args.profile,
    )

    def body(registry: ToolRegistry, policy: ToolPolicy) -> int:
        allowed = registry.for_scope(scope)
        print(
            f"scope: platform={scope.platform} chat={scope.chat_id or '-'} "
            f"provider={scope.provider or '-'} model={scope.model or '-'} "
            f"subagent={'yes' if scope.is_subagent else 'no'} profile={scope.profile or '-'}"
        )
        print("layers: " + ", ".join(layer.label for layer in policy.layers(scope)))
        print()
        rows = [
            (t.name, t.group, "maybe" if t.approval else "", short(t.description)) for t in allowed
        ]
        print_table(("TOOL", "GROUP", "APPROVAL", "DESCRIPTION"), rows)
        print(f"\n{len(allowed)} of {len(registry.all())} tools allowed")
        removed: dict[str, str] = {}
        if args.all:
            unavailable = registry.unavailable(scope)
            offered = [t for t in registry.all() if t.name not in unavailable]
            removed = policy.removed_by(scope, offered)
            removed |= {name: f"not offered: {why}" for name, why in unavailable.items()}
        if removed:
            print()
            print_table(("REMOVED", "BY"), sorted(removed.items()))
        return EXIT_OK

    return _with_registry(settings, body)


def cmd_groups(settings: Settings, args: argparse.Namespace) -> int:
    from tools.toolsets import describe_groups

    def body(registry: ToolRegistry, policy: ToolPolicy) -> int:
        rows = [
            (group, ", ".join(members) or "(none yet)", about)
            for group, members, about in describe_groups(registry.all(), registry.declared_groups())
        ]
        print_table(("GROUP", "TOOLS", "ABOUT"), rows)
        return EXIT_OK

    return _with_registry(settings, body)


def cmd_show(settings: Settings, args: argparse.Namespace) -> int:
    import json

    def body(registry: ToolRegistry, policy: ToolPolicy) -> int:
        spec = registry.get(args.name)
        if spec is None:
            known = ", ".join(sorted(registry.names()))
            print(f"no tool named {args.name!r}; known tools: {known}", file=sys.stderr)
            return EXIT_CONFIG
        print(json.dumps(spec.schema(), indent=2, ensure_ascii=False))
        return EXIT_OK

    return _with_registry(settings, body)


def _with_registry(settings: Settings, body: Callable[[ToolRegistry, ToolPolicy], int]) -> int:
    """Run `body` on the offline registry; a policy error prints like any config error."""
    from gateway.config import ConfigError

    if settings.mcp.servers:
        from gateway.runtime.logs import setup_logging

        # Servers that fail are named once on stderr; their log lines would repeat it.
        setup_logging(settings.model_copy(update={"log_level": "CRITICAL"}))
    try:
        with offline_registry(settings, mcp_servers=True) as (registry, policy):
            return body(registry, policy)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config error: {problem}", file=sys.stderr)
        return EXIT_CONFIG


def _names(values: list[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]
