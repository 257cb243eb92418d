"""Markdown to Telegram HTML: escaping, the entities Telegram allows, and parts that fit 4096."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.telegram.render import render_parts, to_html, utf16_len
from tests.fakes.telegram import EntityError, parse_html


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("**bold** and *it* and _it_", "<b>bold</b> and <i>it</i> and <i>it</i>"),
        ("__b__ and ***both***", "<b>b</b> and <b><i>both</i></b>"),
        ("~~gone~~ ||secret||", "<s>gone</s> <tg-spoiler>secret</tg-spoiler>"),
        ("use `x<y>` here", "use <code>x&lt;y&gt;</code> here"),
        ("[docs](https://x.test/?a=1&b=\"2\")", '<a href="https://x.test/?a=1&amp;b=&quot;2&quot;">docs</a>'),
        ("[bad](javascript:alert(1))", "[bad](javascript:alert(1))"),
        ("# Title with `code`", "<b>Title with code</b>"),
        ("## C# tips", "<b>C# tips</b>"),
        ("- one\n  * two", "• one\n  • two"),
        ("> quoted **text**\n> more", "<blockquote>quoted <b>text</b>\nmore</blockquote>"),
        ("snake_case_name and 2 * 3 * 4", "snake_case_name and 2 * 3 * 4"),
        ("**bold `code` inside**", "<b>bold code inside</b>"),
        ("```\nplain <code>\n```", "<pre>plain &lt;code&gt;</pre>"),
        ("```py\nx = 1 & 2\n```", '<pre><code class="language-py">x = 1 &amp; 2</code></pre>'),
        ("```\nunclosed fence", "<pre>unclosed fence</pre>"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "<pre>| a | b |\n|---|---|\n| 1 | 2 |</pre>"),
        ("---", "──────────"),
    ],
)  # fmt: skip
def test_to_html(markdown: str, html: str) -> None:
    assert to_html(markdown) == html
    parse_html(html)  # and Telegram would accept it


def test_fake_rejects_what_telegram_rejects() -> None:
    for bad in ("a < b", "<x>y</x>", "<b>open", "<b><i>x</b></i>", "<b><code>x</code></b>"):
        with pytest.raises(EntityError):
            parse_html(bad)


def test_escaping_growth_still_fits() -> None:
    text = "&" * 9000  # 5x longer once escaped
    parts = render_parts(text)
    assert len(parts) >= 10
    assert all(utf16_len(p.text) <= 4096 for p in parts)
    assert "".join(parse_html(p.text).rsplit("\n", 1)[0] for p in parts).count("&") == 9000


def test_astral_emoji_count_twice() -> None:
    parts = render_parts("😀" * 3000)
    assert len(parts) == 2 and all(utf16_len(p.text) <= 4096 for p in parts)


def test_plain_parts_are_not_rendered() -> None:
    [part] = render_parts("**not bold** <b>", markdown=False)
    assert (part.text, part.html) == ("**not bold** <b>", False)


_markdown_pieces = st.sampled_from(
    ["word", " ", "\n", "\n\n", "**", "*", "_", "__", "`", "```", "```python\n", "~~", "||",
     "<", ">", "&", "[x](https://e.test/a_b)", "# ", "> ", "- ", "| a |", "😀", "é", "\\"]
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(_markdown_pieces, max_size=400), st.integers(min_value=1, max_value=30))
def test_any_markdown_renders_to_valid_parts(pieces: list[str], repeat: int) -> None:
    text = "".join(pieces) * repeat
    for part in render_parts(text):
        assert utf16_len(part.text) <= 4096 and utf16_len(part.plain) <= 4096
        parse_html(part.text)
