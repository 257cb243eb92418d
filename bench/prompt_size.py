"""Prompt size: what every LLM call carries before the conversation starts.

Prints the estimated tokens of the system prompt (with the skills index) plus the tool schemas
sent on a turn, with every group installed (the built-in tools, the browser, the media tools,
and an MCP server: the fake notes server from tests/fakes/mcp_server.py over stdio), before
tools on demand (every allowed schema, `tools.on_demand = false`) and after (the core set plus
load_tools). Then per group and per tool. Tokens are estimated as characters / 4 (no tokenizer
is assumed; real counts differ by model, usually within ~20%). Schemas are measured as sent on
the wire (`json.dumps` with default separators, like gateway/llm/client.py).

    .venv/bin/python bench/prompt_size.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.app.tools_cli import offline_registry  # noqa: E402
from gateway.config import Settings  # noqa: E402
from gateway.sdk.messages import ChatKind, ChatRef, UserRef  # noqa: E402
from gateway.sdk.tooling import ToolScope, ToolSpec  # noqa: E402
from gateway.turn.prompt import build_system_prompt, turn_prompt  # noqa: E402
from tools.skills.library import default_library  # noqa: E402
from tools.toolsets import describe_groups  # noqa: E402

CHAT = ChatRef(platform="telegram", chat_id="42", kind=ChatKind.DIRECT)
USER = UserRef(platform="telegram", user_id="7", display_name="Ana")
MCP_SERVER = {"command": sys.executable, "args": [str(ROOT / "tests" / "fakes" / "mcp_server.py")]}


def tokens(chars: int) -> int:
    return round(chars / 4)


def schema_chars(tools: list[ToolSpec[Any]]) -> int:
    return len(json.dumps([t.schema() for t in tools], ensure_ascii=False)) if tools else 0


def system_prompt(data_dir: Path) -> str:
    skills = default_library(data_dir).prompt_section(CHAT, USER)
    return turn_prompt(build_system_prompt(CHAT, USER), [skills], "")


def measure(tmp: Path, on_demand: bool) -> tuple[int, int, int, list[ToolSpec[Any]]]:
    """(system chars, schema chars, tools installed, registry tools) for a first turn."""
    # Media endpoints set so image_generate, text_to_speech and vision_analyze are installed
    # (nothing is called: the bench only measures schemas).
    endpoint = {"base_url": "http://127.0.0.1:9/v1"}
    settings = Settings(
        data_dir=tmp,
        tools={"on_demand": on_demand},
        mcp={"servers": {"notes": MCP_SERVER}},
        llm={"vision_model": "vision-model"},
        images=endpoint,
        tts=endpoint,
    )
    with offline_registry(settings, mcp_servers=True) as (registry, _policy):
        scope = ToolScope("telegram", "42", settings.llm.provider_name, settings.llm.model)
        sent = registry.toolbox(scope).specs()
        return len(system_prompt(tmp)), schema_chars(sent), len(registry.all()), registry.all()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        before = measure(Path(tmp), on_demand=False)
        after = measure(Path(tmp), on_demand=True)
    print("Estimated tokens = characters / 4 (an estimate, not a tokenizer count).")
    print(f"Installed: {before[2]} tools (built-in, browser, media, MCP server 'notes').\n")
    print(f"{'first turn':<28}{'system tok':>11}{'schema tok':>12}{'total tok':>11}")
    for label, (system, schemas, _n, _t) in (
        ("before: every schema", before),
        ("after: core + load_tools", after),
    ):
        print(
            f"{label:<28}{tokens(system):>11,}{tokens(schemas):>12,}{tokens(system + schemas):>11,}"
        )

    tools = before[3]
    by_name = {t.name: t for t in tools}
    print(f"\n{'group':<22}{'tools':>6}{'schema tok':>12}")
    for group, members, _about in describe_groups(tools):
        size = tokens(schema_chars([by_name[m] for m in members]))
        print(f"{group:<22}{len(members):>6}{size:>12,}")
    print(f"\n{'tool':<24}{'group':<12}{'tokens':>7}")
    for tool in sorted(tools, key=lambda t: -schema_chars([t])):
        print(f"{tool.name:<24}{tool.group:<12}{tokens(schema_chars([tool])):>7,}")


if __name__ == "__main__":
    main()
