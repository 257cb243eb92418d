"""The text side of streaming: holding back text tool calls, cutting at the limit, progress
lines with secrets scrubbed, and the LLM client's reasoning and visible-text listeners."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from gateway.config import LLMSettings
from gateway.llm.client import LLMClient
from gateway.llm.stream import VisibleText
from gateway.llm.types import ToolCall
from gateway.sdk.tooling import ToolSpec
from gateway.streaming.holdback import CallHoldback
from gateway.streaming.progress import SecretScrubber, describe_call
from gateway.streaming.split import close_fences, cut
from gateway.streaming.textsplit import open_fence
from tests.fakes.llm import Reply, ScriptedLLM

CALL_JSON = '{"name": "read_file", "arguments": {"path": "notes.md"}}'


def shown(text: str, *, step: int = 1, names: list[str] | None = None) -> str:
    holdback = CallHoldback(names)
    return "".join(holdback.feed(text[i : i + step]) for i in range(0, len(text), step))


# -- hold-back ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("Plain prose, nothing held.", "Plain prose, nothing held."),
        (f"Let me look.\n<tool_call>{CALL_JSON}</tool_call>", "Let me look.\n"),
        (f"Sure [TOOL_CALLS][{CALL_JSON}]", "Sure "),
        ('Sure <|python_tag|>{"name": "x", "parameters": {}}', "Sure "),
        ("<function=read_file>{}</function>", ""),
        (CALL_JSON, ""),  # a reply that opens with JSON may be the call itself
        (f"Look:\n```json\n{CALL_JSON}\n```\nDone.", "Look:\n\nDone."),
        ('Data:\n```json\n{"a": 1}\n```\nDone.', 'Data:\n```json\n{"a": 1}\n```\nDone.'),
        ("Shell:\n```bash\nls -la\n```\nok", "Shell:\n```bash\nls -la\n```\nok"),
        ("Write `<tool_call>` tags.", "Write `<tool_call>` tags."),
    ],
)
@pytest.mark.parametrize("step", [1, 3, 1000])
def test_holdback_shows_prose_and_never_call_markup(text: str, visible: str, step: int) -> None:
    assert shown(text, step=step) == visible


def test_python_fences_are_calls_only_for_offered_tools() -> None:
    text = "Run:\n```python\nread_file(path='notes.md')\n```\nok"
    assert shown(text, names=["read_file"]) == "Run:\n\nok"
    assert shown(text, names=["shell"]) == text
    code = "Code:\n```python\nimport os\nprint(os.sep)\n```\n"
    assert shown(code, names=["read_file"]) == code


def test_plain_code_streams_before_its_fence_closes() -> None:
    holdback = CallHoldback(["read_file"])
    out = holdback.feed("```bash\nls -la\necho one\n")
    assert out == "```bash\nls -la\necho one\n"  # not held until the closing fence


def test_reset_starts_a_new_completion() -> None:
    holdback = CallHoldback()
    assert holdback.feed(f"<tool_call>{CALL_JSON}") == ""
    assert holdback.feed(" more") == ""  # held to the end of that completion
    holdback.reset()
    assert holdback.feed("The answer.") == "The answer."


@given(st.text(alphabet="ab `<>{}[\n", max_size=60), st.integers(min_value=1, max_value=7))
def test_holdback_output_is_always_a_prefix_of_prose(text: str, step: int) -> None:
    # Whatever the chunking, what is shown comes from the text in order (never invented).
    out = shown("Prose: " + text, step=step)
    assert out.startswith("Prose: ")
    assert "Prose: " + text == out or _subsequence(out, "Prose: " + text)


def _subsequence(small: str, big: str) -> bool:
    it = iter(big)
    return all(ch in it for ch in small)


# -- cutting at the limit ------------------------------------------------------------------------


def test_text_that_fits_is_not_cut() -> None:
    assert cut("short", 100) is None


def test_cut_prefers_paragraphs_and_is_stable_as_text_grows() -> None:
    text = "\n\n".join(f"Paragraph {n} " + "word " * 30 for n in range(6))
    first = cut(text, 400)
    assert first is not None and len(first.head) <= 400
    assert first.head.endswith("word") and first.reopen == ""
    grown = cut(text + " and more words arriving", 400)
    assert grown == first  # the finished part never changes once the text passed the limit


def test_cut_inside_code_closes_and_reopens_the_fence() -> None:
    text = "Intro\n\n```python\n" + "\n".join(f"x{n} = {n}" for n in range(100)) + "\n```\n"
    piece = cut(text, 300)
    assert piece is not None
    assert piece.head.endswith("\n```") and open_fence(piece.head) is None
    assert piece.reopen == "```python\n"
    rest = piece.reopen + text[piece.consumed :]
    assert rest.startswith("```python\nx")
    assert (piece.head.removesuffix("\n```") + "\n" + text[piece.consumed :]).count("x42 = 42") == 1


def test_cut_measures_the_rendered_size() -> None:
    text = "<&>" * 300  # escaping makes it five times longer on the wire

    def measure(markdown: str) -> int:
        return len(markdown.replace("<", "&lt;").replace(">", "&gt;").replace("&", "&amp;"))

    piece = cut(text, 1000, measure)
    assert piece is not None and measure(piece.head) <= 1000


def test_close_fences_only_when_one_is_open() -> None:
    assert close_fences("a\n```py\nx = 1") == "a\n```py\nx = 1\n```"
    assert close_fences("a\n```py\nx\n```\n") == "a\n```py\nx\n```\n"


# -- progress lines ---------------------------------------------------------------------------


class ReadArgs(BaseModel):
    path: str


async def _read(args: ReadArgs, ctx: object) -> str:
    return ""


def test_generic_line_names_the_tool_and_its_main_argument() -> None:
    call = ToolCall("c1", "shell", '{"command": "ls -la", "timeout": 5}')
    assert describe_call(call, None, SecretScrubber(), verbose=False) == "Running shell: `ls -la`"
    verbose = describe_call(call, None, SecretScrubber(), verbose=True)
    assert verbose == "Running shell: command=`ls -la`, timeout=`5`"


def test_a_tool_may_describe_its_own_calls() -> None:
    spec = ToolSpec("read_file", "", ReadArgs, _read, "fs", progress=lambda a: f"Reading {a.path}")
    call = ToolCall("c1", "read_file", '{"path": "notes.md"}')
    assert describe_call(call, spec, SecretScrubber(), verbose=False) == "Reading notes.md"


@pytest.mark.parametrize(
    "command",
    [
        "curl -H 'Authorization: Bearer abcdefghijklmnop1234' https://x",
        "export API_KEY=abcdef123456 && run",
        "psql postgres://admin:hunter2hunter2@db/prod",
        "echo sk-proj-abcdefghijklmnopqrstuvwxyz",
        "deploy --token ghp_abcdefghijklmnopqrstuvwxyz0123",
        "use the configured s3cr3t-value-from-settings here",
    ],
)
def test_secrets_never_reach_a_progress_line(command: str) -> None:
    scrub = SecretScrubber(["s3cr3t-value-from-settings"])
    call = ToolCall("c", "shell", json.dumps({"command": command}))
    line = describe_call(call, None, scrub, verbose=True)
    for secret in ("abcdefghijklmnop1234", "abcdef123456", "hunter2", "sk-proj", "ghp_", "s3cr3t"):
        assert secret not in line, line


def test_secret_named_arguments_are_masked_and_long_values_cut() -> None:
    call = ToolCall("c", "login", '{"user": "ana", "password": "pw", "note": "' + "x" * 200 + '"}')
    line = describe_call(call, None, SecretScrubber(), verbose=True)
    assert "password=***" in line and "pw" not in line.replace("password", "")
    assert len(line) <= 160 and "…" in line


# -- the LLM layer: think blocks as reasoning ------------------------------------------------------


def test_visible_text_hands_think_blocks_to_reasoning() -> None:
    visible = VisibleText(hide_calls=False)
    out = visible.feed("<think>plan the ") + visible.feed("answer</think>Hello")
    assert out == "Hello"
    assert visible.take_thoughts() == "plan the answer"
    assert visible.take_thoughts() == ""


async def test_client_streams_reasoning_and_text_to_separate_listeners() -> None:
    async with ScriptedLLM() as server:
        settings = LLMSettings(base_url=server.url, model="fake-model", max_retries=0)
        async with LLMClient(settings) as client:
            server.push(Reply(content="<think>weigh it</think>Hello there", reasoning="first, "))
            text: list[str] = []
            thoughts: list[str] = []

            async def on_text(delta: str) -> None:
                text.append(delta)

            async def on_reasoning(delta: str) -> None:
                thoughts.append(delta)

            messages = [{"role": "user", "content": "hi"}]
            completion = await client.complete(messages, on_text=on_text, on_reasoning=on_reasoning)
    assert "".join(text) == completion.content == "Hello there"
    assert "".join(thoughts) == "first, weigh it"
