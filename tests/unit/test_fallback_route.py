"""Route helpers: usage estimated when the server reports none."""

from __future__ import annotations

from gateway.llm.fallback import estimate_usage
from gateway.llm.types import Completion, ToolCall, Usage


def test_usage_is_estimated_at_four_characters_a_token() -> None:
    completion = Completion(
        content="x" * 40,
        tool_calls=(ToolCall("c1", "shell", '{"command": "ls"}'),),
        reasoning=None,
        finish_reason="stop",
        usage=Usage(),
    )
    usage = estimate_usage([{"role": "user", "content": "y" * 398}], None, completion)
    assert usage.prompt_tokens == 100  # 400 characters of JSON string
    assert usage.completion_tokens == -(-(40 + 5 + 17) // 4)
