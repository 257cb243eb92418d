"""split_text: platform limits, preferred cut points, code fences kept intact."""

import pytest

from adapters.base import split_text


def test_short_text_is_one_part() -> None:
    assert split_text("hello", 4096) == ["hello"]


def test_parts_fit_the_limit_and_are_numbered() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 60 for i in range(40))
    parts = split_text(text, 500)
    assert len(parts) > 5
    assert all(len(p) <= 500 for p in parts)
    assert parts[0].endswith(f"(1/{len(parts)})")
    assert parts[-1].endswith(f"({len(parts)}/{len(parts)})")


def test_prefers_paragraph_breaks() -> None:
    text = ("a" * 150 + "\n\n") * 4
    parts = split_text(text, 400, number=False)
    assert all(p.replace("\n\n", "").strip("a") == "" for p in parts)
    assert all(not p.startswith("\n") for p in parts)


def test_sentence_boundary_when_no_newlines() -> None:
    text = " ".join(f"This is sentence number {i}." for i in range(100))
    parts = split_text(text, 300, number=False)
    assert all(p.endswith(".") for p in parts[:-1])


def test_no_content_lost() -> None:
    words = [f"w{i}" for i in range(2000)]
    text = " ".join(words)
    parts = split_text(text, 256, number=False)
    assert " ".join(parts).split() == words


def test_code_fence_closed_and_reopened() -> None:
    code = "\n".join(f"    print({i})" for i in range(200))
    text = f"Here is the code:\n\n```python\n{code}\n```\n\nDone."
    parts = split_text(text, 1000)
    assert len(parts) > 2
    for part in parts:
        body = part.rsplit("\n(", 1)[0]
        assert body.count("```") % 2 == 0, part
        assert len(part) <= 1000
    assert parts[1].startswith("```python\n")
    joined = "".join(parts)
    for i in range(200):
        assert f"print({i})" in joined


def test_never_cuts_inside_a_code_line_when_lines_fit() -> None:
    code = "\n".join(f"x_{i} = {i} * 2  # comment" for i in range(300))
    parts = split_text(f"```\n{code}\n```", 700, number=False)
    for part in parts:
        for line in part.split("\n"):
            assert line == "```" or line.startswith("x_"), line


def test_hard_cut_for_one_long_word() -> None:
    parts = split_text("x" * 5000, 2000, number=False)
    assert "".join(parts) == "x" * 5000
    assert all(len(p) <= 2000 for p in parts)


def test_tiny_limit_rejected() -> None:
    with pytest.raises(ValueError):
        split_text("x" * 100, 25)
