"""Markdown to Slack mrkdwn, and Slack markup back to plain text."""

from __future__ import annotations

import pytest

from adapters.slack.mrkdwn import RULE_LINE, escape, to_mrkdwn, to_plain
from adapters.slack.sending import MAX_TEXT, render_parts


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __also__", "*bold* and *also*"),
        ("*italic* and _this_", "_italic_ and _this_"),
        ("~~gone~~", "~gone~"),
        ("`a < b && c`", "`a &lt; b &amp;&amp; c`"),
        ("[docs](https://x.test/a?b=1&c=2)", "<https://x.test/a?b=1&amp;c=2|docs>"),
        ("[a|b>c](https://x.test/p|q)", "<https://x.test/p%7Cq|a|b&gt;c>"),
        ("<https://x.test>", "<https://x.test>"),
        ("[https://x.test](https://x.test)", "<https://x.test>"),
        ("see [notes](notes.md)", "see notes (notes.md)"),
        ("![chart](https://x.test/c.png)", "<https://x.test/c.png|chart>"),
        ("**[docs](https://x.test)**", "*<https://x.test|docs>*"),
        ("# Title", "*Title*"),
        ("### **Sub** title ###", "*Sub title*"),
        ("- one\n- two\n  - nested", "• one\n• two\n  ◦ nested"),
        ("* star item", "• star item"),
        ("- [ ] todo\n- [x] done", "• ☐ todo\n• ☑ done"),
        ("1. first\n2) second", "1. first\n2. second"),
        ("> quoted **text**", "> quoted *text*"),
        ("---", RULE_LINE),
        ("5 > 3 & 2 < 4", "5 &gt; 3 &amp; 2 &lt; 4"),
        ("snake_case_name and 2 * 3 * 4", "snake_case_name and 2 * 3 * 4"),
        ("ask <@U123> or <!here>", "ask <@U123> or <!here>"),
        ("<script>", "&lt;script&gt;"),
    ],
)
def test_inline_and_lines(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_code_block_drops_language_and_escapes() -> None:
    markdown = "Run:\n```python\nif a < b and **x**:\n    print('&')\n```\ndone"
    assert to_mrkdwn(markdown) == (
        "Run:\n```\nif a &lt; b and **x**:\n    print('&amp;')\n```\ndone"
    )


def test_unclosed_code_block_still_code() -> None:
    assert to_mrkdwn("```\n<b>") == "```\n&lt;b&gt;\n```"


def test_escape() -> None:
    assert escape("a&b<c>d") == "a&amp;b&lt;c&gt;d"


@pytest.mark.parametrize(
    ("slack", "plain"),
    [
        ("hi <@U123> and <@U9|bob>", "hi @U123 and @bob"),
        ("in <#C1|general>", "in #general"),
        ("<!here> <!subteam^S1|@devs>", "@here @@devs"),
        ("<https://x.test|site> <https://y.test>", "site (https://x.test) https://y.test"),
        ("<mailto:a@b.test|a@b.test>", "a@b.test"),
        ("1 &lt; 2 &amp;&amp; 3 &gt; 2", "1 < 2 && 3 > 2"),
    ],
)
def test_to_plain(slack: str, plain: str) -> None:
    assert to_plain(slack) == plain


def test_render_parts_split_within_limit() -> None:
    text = "\n\n".join(f"**Part {n}** " + "word & word " * 60 for n in range(20))
    parts = render_parts(text, markdown=True)
    assert len(parts) > 1 and all(len(p) <= MAX_TEXT for p in parts)
    assert parts[0].startswith("*Part 0*") and parts[-1].endswith(f"({len(parts)}/{len(parts)})")


def test_render_parts_plain_text_is_escaped_and_never_empty() -> None:
    assert render_parts("a < b **c**", markdown=False) == ["a &lt; b **c**"]
    assert render_parts("   ", markdown=True) == ["…"]
    assert len(render_parts("x" * 5000, markdown=True, split=False)[0]) == MAX_TEXT
