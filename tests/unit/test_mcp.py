"""The MCP client's pure parts: model-facing names, argument checking, result conversion,
approval rules, settings and secret masking, and the registry's dynamic tool source with its
policy groups."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    Prompt,
    PromptArgument,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)
from pydantic import BaseModel, ValidationError

from gateway.config import ConfigError, MCPServerSettings, Settings, load_settings, masked
from gateway.runtime.secrets import secret_values
from gateway.sdk.tooling import ToolContext, ToolScope, ToolSpec
from tools.mcp.arguments import arguments_model
from tools.mcp.naming import MAX_LENGTH, tool_name
from tools.mcp.prompts import prompt_arguments
from tools.mcp.results import tool_output
from tools.mcp.toolspecs import approval_reason
from tools.policy import ToolPolicy, ToolPolicyError, check_policy
from tools.registry import ToolRegistry
from tools.toolsets import describe_groups

# -- names -----------------------------------------------------------------------------------


def test_names_are_prefixed_sanitised_and_stable() -> None:
    taken: set[str] = set()
    assert tool_name("github", "create_issue", taken) == "mcp_github_create_issue"
    assert tool_name("home", "lights.on/off", taken) == "mcp_home_lights_on_off"
    long = "x" * 100
    first = tool_name("db", long, set())
    assert len(first) == MAX_LENGTH and first == tool_name("db", long, set())
    assert first != tool_name("db", long + "y", set())


def test_names_that_clash_after_sanitising_stay_distinct() -> None:
    taken: set[str] = set()
    a = tool_name("s", "a.b", taken)
    b = tool_name("s", "a_b", taken)
    assert a == "mcp_s_a_b" and b != a and b.startswith("mcp_s_a_b_") and taken == {a, b}


# -- arguments -------------------------------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "title": "issueArguments",
    "properties": {
        "title": {"type": "string"},
        "labels": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title"],
    "additionalProperties": False,
}


def test_the_server_schema_goes_to_the_model_unchanged() -> None:
    args = arguments_model("mcp_gh_issue", SCHEMA)

    async def handler(a: Any, ctx: ToolContext) -> str:
        return ""

    spec = ToolSpec("mcp_gh_issue", "Open an issue.", args, handler, "mcp:gh")
    params = spec.schema()["function"]["parameters"]
    assert params == {k: v for k, v in SCHEMA.items() if k not in ("title", "$schema")}


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({}, "'title' is a required property"),
        ({"title": 3}, "title: 3 is not of type 'string'"),
        ({"title": "t", "labels": ["a", 2]}, "labels.1: 2 is not of type 'string'"),
        ({"title": "t", "extra": 1}, "Additional properties are not allowed"),
    ],
)
def test_arguments_are_checked_against_the_schema(given: dict[str, Any], problem: str) -> None:
    args = arguments_model("t", SCHEMA)
    with pytest.raises(ValidationError, match=problem):
        args.model_validate(given)
    assert args.model_validate({"title": "ok", "labels": ["bug"]}).root == {
        "title": "ok",
        "labels": ["bug"],
    }


def test_a_schema_jsonschema_cannot_read_is_left_to_the_server() -> None:
    args = arguments_model("odd", {"type": "object", "properties": {"a": {"type": "nonsense"}}})
    assert args.model_validate({"a": 1}).root == {"a": 1}
    empty = arguments_model("none", {})
    assert empty.model_json_schema() == {"type": "object", "properties": {}}


# -- results ---------------------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG" + bytes(12 * 1024)).decode()


def test_text_images_and_resources_become_text_and_media() -> None:
    result = CallToolResult(
        content=[
            TextContent(text="two results"),
            ImageContent(data=PNG, mime_type="image/png"),
            EmbeddedResource(
                resource=TextResourceContents(uri="notes://a", mime_type="text/plain", text="A")
            ),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="files://b.pdf", mime_type="application/pdf", blob="AAAA"
                )
            ),
            ResourceLink(uri="notes://c", name="c", description="the third"),
        ]
    )
    output = tool_output(result, max_chars=1000)
    assert output.text.splitlines() == [
        "two results",
        "[image: image/png, 12 KB]",
        "[resource notes://a]",
        "A",
        "[file files://b.pdf: application/pdf, 3 B]",
        "[resource link: c notes://c - the third]",
    ]
    image, pdf = output.media
    assert (image.kind, image.mime_type, image.data[:4]) == ("image", "image/png", b"\x89PNG")
    assert (pdf.kind, pdf.uri, pdf.data) == ("file", "files://b.pdf", b"\x00\x00\x00")
    assert not output.is_error


def test_structured_only_empty_bad_data_errors_and_the_cap() -> None:
    only_json = CallToolResult(content=[], structured_content={"n": 1})
    assert tool_output(only_json, max_chars=100).text == '{"n": 1}'
    assert tool_output(CallToolResult(content=[]), max_chars=100).text == "(no output)"
    bad = CallToolResult(content=[ImageContent(data="%%%", mime_type="image/png")])
    assert tool_output(bad, max_chars=100).text == "[image: image/png, unreadable data]"
    failed = CallToolResult(content=[TextContent(text="nope")], is_error=True)
    assert tool_output(failed, max_chars=100).is_error
    long = tool_output(CallToolResult(content=[TextContent(text="y" * 250)]), max_chars=100)
    assert long.text == "y" * 100 + "\n[... 150 more characters cut: the output is capped at 100]"


# -- prompt commands ------------------------------------------------------------------------


def prompt(*arguments: tuple[str, bool]) -> Prompt:
    return Prompt(
        name="p", arguments=[PromptArgument(name=n, required=r) for n, r in arguments] or None
    )


@pytest.mark.parametrize(
    ("declared", "given", "expected"),
    [
        ((("topic", True),), "the MCP issue", {"topic": "the MCP issue"}),
        ((("topic", True),), "topic=x", {"topic": "x"}),
        ((("a", True), ("b", False)), 'a=1 b="two words"', {"a": "1", "b": "two words"}),
        ((("a", True), ("b", False)), "a=1", {"a": "1"}),
        ((), "", {}),
        ((("a", False),), "", {}),
    ],
)
def test_prompt_arguments_from_the_command_text(
    declared: tuple[tuple[str, bool], ...], given: str, expected: dict[str, str]
) -> None:
    assert prompt_arguments(prompt(*declared), given) == (expected, "")


@pytest.mark.parametrize("given", ["", "just words", "a=1 c=3", "b=2", 'a="unclosed'])
def test_prompt_arguments_that_do_not_fit_get_the_usage(given: str) -> None:
    arguments, usage = prompt_arguments(prompt(("a", True), ("b", False)), given)
    assert arguments == {} and usage == "Usage: /p a=… [b=…]"


# -- approvals -------------------------------------------------------------------------------


def tool(**hints: Any) -> Tool:
    annotations = ToolAnnotations(**hints) if hints else None
    return Tool(name="t", input_schema={"type": "object"}, annotations=annotations)


@pytest.mark.parametrize(
    ("server", "hints", "asks"),
    [
        ({"trust_hints": True}, {"read_only_hint": True}, False),
        ({"trust_hints": True}, {}, True),  # no annotations: maybe destructive
        ({"trust_hints": True}, {"read_only_hint": False}, True),
        ({"trust_hints": True}, {"destructive_hint": False}, True),  # not read-only: asks
        ({"trust_hints": True}, {"read_only_hint": True, "destructive_hint": True}, True),
        # Issue 30 finding 14: by default the server's own marks decide nothing.
        ({}, {"read_only_hint": True}, True),
        ({"read_only_tools": ["t"]}, {}, False),
        ({"read_only_tools": ["[st]*"]}, {"destructive_hint": True}, False),
        ({"read_only_tools": ["other"]}, {"read_only_hint": True}, True),
        ({"approval": "always", "trust_hints": True}, {"read_only_hint": True}, True),
        ({"approval": "always", "read_only_tools": ["t"]}, {}, True),
        ({"approval": "never"}, {"destructive_hint": True}, False),
    ],
)
def test_which_calls_ask_for_approval(
    server: dict[str, Any], hints: dict[str, Any], asks: bool
) -> None:
    cfg = MCPServerSettings(command="srv", **server)
    assert (approval_reason(cfg, tool(**hints), "srv") is not None) is asks


# -- settings --------------------------------------------------------------------------------


def test_servers_from_toml_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "chatgate.toml"
    path.write_text(
        "[mcp.servers.github]\n"
        'command = "npx"\n'
        'args = ["-y", "@modelcontextprotocol/server-github"]\n'
        'env = { GITHUB_PERSONAL_ACCESS_TOKEN = "ghp_filetoken123" }\n'
    )
    monkeypatch.setenv("CHATGATE_MCP__SERVERS__NOTES__URL", "http://127.0.0.1:8765/mcp")
    monkeypatch.setenv(
        "CHATGATE_MCP__SERVERS__NOTES__HEADERS", '{"Authorization": "Bearer tk-987654"}'
    )
    monkeypatch.setenv("CHATGATE_MCP__SERVERS__NOTES__APPROVAL", "always")
    settings = load_settings(path)
    github, notes = settings.mcp.servers["github"], settings.mcp.servers["notes"]
    assert github.args == ["-y", "@modelcontextprotocol/server-github"]
    assert github.env["GITHUB_PERSONAL_ACCESS_TOKEN"].get_secret_value() == "ghp_filetoken123"
    assert (github.approval, github.timeout_seconds, github.enabled) == ("destructive", 60, True)
    assert notes.url == "http://127.0.0.1:8765/mcp" and notes.approval == "always"

    shown = masked(settings)["mcp"]["servers"]
    assert shown["github"]["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "********"}
    assert shown["notes"]["headers"] == {"Authorization": "********"}
    secrets = secret_values(settings)
    assert {"ghp_filetoken123", "Bearer tk-987654", "tk-987654"} <= set(secrets)


@pytest.mark.parametrize(
    ("server", "problem"),
    [
        ({}, "set command (a stdio server) or url (an HTTP server)"),
        ({"command": "x", "url": "http://h/mcp"}, "not both"),
        ({"url": "ftp://h"}, "must start with http:// or https://"),
        ({"command": "x", "approval": "sometimes"}, "approval"),
        ({"command": "x", "timeout_seconds": 0}, "timeout_seconds"),
    ],
)
def test_bad_server_settings_are_one_line_each(server: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, mcp={"servers": {"s": server}})
    assert any(problem in line for line in caught.value.problems), caught.value.problems


def test_server_names_must_make_tool_names() -> None:
    with pytest.raises(ConfigError, match="server name 'my server'"):
        load_settings(None, mcp={"servers": {"my server": {"command": "x"}}})


# -- the registry's dynamic source and the policy groups -------------------------------------


class NoArgs(BaseModel):
    pass


async def _noop(args: NoArgs, ctx: ToolContext) -> str:
    return ""


def make(name: str, group: str) -> ToolSpec[Any]:
    return ToolSpec(name=name, description="", args=NoArgs, handler=_noop, group=group)


class Source:
    """A stand-in for the MCP manager: servers declared, tools that come and go."""

    def __init__(self, servers: Sequence[str]) -> None:
        self.servers = servers
        self.current: list[ToolSpec[Any]] = []

    def tools(self) -> Sequence[ToolSpec[Any]]:
        return self.current

    def groups(self) -> Mapping[str, str]:
        return {f"mcp:{s}": f"tools of {s}" for s in self.servers}


def test_source_tools_come_and_go_and_never_shadow_a_registered_tool() -> None:
    registry = ToolRegistry([make("read_file", "fs")])
    source = Source(["gh"])
    registry.add_source(source)
    assert registry.names() == ["read_file"]
    source.current = [make("mcp_gh_issue", "mcp:gh"), make("read_file", "mcp:gh")]
    assert registry.names() == ["read_file", "mcp_gh_issue"]
    assert registry.get("read_file") is not None and registry.get("read_file").group == "fs"  # type: ignore[union-attr]
    assert registry.get("mcp_gh_issue") is not None
    source.current = []
    assert registry.get("mcp_gh_issue") is None


def scope(chat: str = "1") -> ToolScope:
    return ToolScope("telegram", chat, "ollama", "qwen")


def test_policy_groups_mcp_and_one_server() -> None:
    settings = Settings(
        tools={
            "deny": ["group:mcp:home"],
            "profiles": {"no_mcp": {"deny": ["group:mcp"]}},
            "chat_profiles": {"telegram:9": "no_mcp"},
        }
    )
    registry = ToolRegistry([make("read_file", "fs")])
    source = Source(["gh", "home", "offline"])
    registry.add_source(source)
    source.current = [make("mcp_gh_a", "mcp:gh"), make("mcp_home_b", "mcp:home")]
    check_policy(settings, registry)  # mcp:offline has no tools yet and is still valid
    policy = ToolPolicy(settings.tools)
    registry.set_filter(policy)
    assert [t.name for t in registry.for_scope(scope())] == ["read_file", "mcp_gh_a"]
    assert [t.name for t in registry.for_scope(scope("9"))] == ["read_file"]
    rows = {
        group: members
        for group, members, _ in describe_groups(registry.all(), registry.declared_groups())
    }
    assert rows["group:mcp"] == ["mcp_gh_a", "mcp_home_b"]
    assert rows["group:mcp:offline"] == []


def test_a_policy_naming_an_unknown_server_is_reported() -> None:
    settings = Settings(tools={"deny": ["group:mcp:gihub"]})
    registry = ToolRegistry()
    registry.add_source(Source(["github"]))
    with pytest.raises(
        ToolPolicyError, match="unknown group 'group:mcp:gihub' \\(did you mean 'group:mcp:github'"
    ):
        check_policy(settings, registry)
