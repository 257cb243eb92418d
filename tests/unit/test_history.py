"""History compaction keeps tool-call groups whole and stays under budget."""

from gateway.history import TRIMMED_NOTE, compact, estimate_tokens


def _turn(i: int, size: int = 400) -> list[dict]:
    return [
        {"role": "user", "content": f"question {i} " + "q" * size},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "content": "r" * size},
        {"role": "assistant", "content": f"answer {i}"},
    ]


def test_under_budget_unchanged() -> None:
    history = _turn(1)
    assert compact(history, 10_000) is history


def test_drops_oldest_whole_turns() -> None:
    history = [m for i in range(30) for m in _turn(i)]
    out = compact(history, 2000)
    assert estimate_tokens(out) <= 2000
    assert out[0] == {"role": "user", "content": TRIMMED_NOTE}
    kept = out[2:]
    assert kept[0]["role"] == "user"
    ids = {m["tool_call_id"] for m in kept if m["role"] == "tool"}
    calls = {c["id"] for m in kept if m.get("tool_calls") for c in m["tool_calls"]}
    assert ids == calls
    assert kept[-1]["content"] == "answer 29"


def test_newest_turn_kept_even_if_too_big() -> None:
    history = _turn(1, size=50_000)
    assert compact(history, 1000) == history


def test_compacting_twice_keeps_one_note() -> None:
    history = [m for i in range(30) for m in _turn(i)]
    once = compact(history, 3000)
    twice = compact([*once, *_turn(99)], 3000)
    assert sum(1 for m in twice if m.get("content") == TRIMMED_NOTE) == 1
