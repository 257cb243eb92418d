"""Prompt size: what every LLM call carries before the conversation starts.

Prints the estimated tokens of the system prompt plus the tool schemas for the default
toolset and for each group, then per tool. Tokens are estimated as characters / 4 (no
tokenizer is assumed; real counts differ by model, usually within ~20%). Schemas are measured
as sent on the wire (`json.dumps` with default separators, like gateway/llm/client.py).

    .venv/bin/python bench/prompt_size.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.config import Settings
from gateway.messages import ChatKind, ChatRef, UserRef
from gateway.prompt import build_system_prompt
from gateway.tooling import ToolScope, ToolSpec
from tools.cli import offline_registry
from tools.toolsets import describe_groups


def tokens(chars: int) -> int:
    return round(chars / 4)


def schema_chars(tools: list[ToolSpec[Any]]) -> int:
    return len(json.dumps([t.schema() for t in tools], ensure_ascii=False)) if tools else 0


def main() -> None:
    chat = ChatRef(platform="telegram", chat_id="42", kind=ChatKind.DIRECT)
    user = UserRef(platform="telegram", user_id="7", display_name="Ana")
    prompt = build_system_prompt(chat, user)
    base = len(prompt)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp))
        with offline_registry(settings) as (registry, _policy):
            scope = ToolScope("telegram", "42", settings.llm.provider_name, settings.llm.model)
            default = list(registry.for_scope(scope))
            by_name = {t.name: t for t in registry.all()}
            rows: list[tuple[str, int, int]] = [
                ("default toolset", len(default), schema_chars(default))
            ]
            rows.append(("(no tools)", 0, 0))
            for group, members, _about in describe_groups(registry.all()):
                tools = [by_name[m] for m in members]
                rows.append((group, len(tools), schema_chars(tools)))

            print("Estimated tokens = characters / 4 (an estimate, not a tokenizer count).")
            print(f"System prompt alone: {base:,} chars, ~{tokens(base):,} tokens.\n")
            print(
                f"{'toolset':<18}{'tools':>6}{'schema chars':>14}{'schema tok':>12}"
                f"{'prompt+schema tok':>19}"
            )
            for name, count, chars in rows:
                print(
                    f"{name:<18}{count:>6}{chars:>14,}{tokens(chars):>12,}"
                    f"{tokens(base + chars):>19,}"
                )

            print(f"\n{'tool':<14}{'group':<10}{'chars':>7}{'tokens':>8}")
            for tool in sorted(registry.all(), key=lambda t: -schema_chars([t])):
                chars = schema_chars([tool])
                print(f"{tool.name:<14}{tool.group:<10}{chars:>7,}{tokens(chars):>8,}")


if __name__ == "__main__":
    main()
