"""Route helpers: images hidden from models without vision; usage estimated when the
server reports none."""

from __future__ import annotations

from gateway.llm.fallback import IMAGE_NOTE, estimate_usage, without_images
from gateway.llm.types import Completion, ToolCall, Usage


def test_images_become_a_note_for_models_without_vision() -> None:
    plain = [{"role": "user", "content": "hi"}]
    assert without_images(plain) is plain
    picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": [{"type": "text", "text": "what is this?"}, picture]},
    ]
    stripped = without_images(messages)
    assert stripped[1]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "text", "text": IMAGE_NOTE},
    ]
    assert messages[1]["content"][1] is picture  # the history itself is not changed


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
