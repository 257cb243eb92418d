"""Text tool-call parsing speed on long replies, honest and hostile.

Prints one row per reply shape: its size, the calls found, and the best and median
milliseconds per `parse` (with the offered names, as a turn passes them) over a few runs; on
a shared machine the best is the steadier figure. Every shape is built
to about 1 MB; the hostile ones repeat the start of a format thousands of times without ever
finishing it, which is what makes backtracking or rescanning parsers quadratic. Then it
times one shape at 0.25, 0.5 and 1 MB to show the growth is linear.

    .venv/bin/python bench/textcalls.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.llm.textcalls import parse

MB = 1_000_000
NAMES = ["get_weather", "search", "write_file"]
CALL = '{"name": "search", "arguments": {"query": "rust"}}'
PROSE = "The quick brown fox jumps over the lazy dog; it is {not} a [call]. "


def fill(unit: str, size: int) -> str:
    return unit * (size // len(unit) + 1)


SHAPES: dict[str, Callable[[int], str]] = {
    "prose, no calls": lambda n: fill(PROSE, n),
    "prose, then <tool_call>": lambda n: fill(PROSE, n) + f"<tool_call>{CALL}</tool_call>",
    "prose, then bare JSON call": lambda n: fill(PROSE, n) + CALL,
    "one call, 1 MB argument": lambda n: (
        '<tool_call>{"name": "write_file", "arguments": '
        + json.dumps({"path": "a.txt", "content": fill("line of text\n", n)})
        + "}</tool_call>"
    ),
    "one Qwen3 call, 1 MB parameter": lambda n: (
        "<tool_call>\n<function=write_file>\n<parameter=content>\n"
        + fill("line of text\n", n)
        + "</parameter>\n</function>\n</tool_call>"
    ),
    "many small <tool_call> blocks": lambda n: fill(f"<tool_call>{CALL}</tool_call>\n", n),
    "many bare JSON calls in prose": lambda n: fill(f"Next: {CALL} done. ", n),
    "many pythonic calls in prose": lambda n: fill("Next: [search(query='rust')] done. ", n),
    "hostile: unclosed <tool_call>{": lambda n: fill('<tool_call>{"name": "a", "arguments": {', n),
    "hostile: call starts, no ends": lambda n: fill('{"name": "search", "arguments": {"q": "', n),
    "hostile: unclosed fences": lambda n: fill("```json\n{", n),
    "hostile: [name( never closed": lambda n: fill("[search(query='x', ", n),
    "hostile: nested brackets": lambda n: fill("[{", n),
    "hostile: <think> never closed": lambda n: "<think>" + fill("<think>a", n),
    "hostile: markers in inline code": lambda n: fill("`<tool_call>` ", n),
}


def timings(text: str, runs: int) -> tuple[float, float, int]:
    """Best and median milliseconds per parse, and the number of calls found."""
    times = []
    calls = 0
    for _ in range(runs):
        start = time.perf_counter()
        reply = parse(text, names=NAMES)
        times.append((time.perf_counter() - start) * 1000)
        calls = len(reply.calls)
    return min(times), statistics.median(times), calls


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"{runs} runs each, names={NAMES}\n")
    header = f"{'reply shape':<34}{'size':>11}{'calls':>8}{'best ms':>10}{'median ms':>11}"
    print(header)
    for label, build in SHAPES.items():
        text = build(MB)
        best, median, calls = timings(text, runs)
        print(f"{label:<34}{len(text):>11,}{calls:>8,}{best:>10.1f}{median:>11.1f}")
    for shape in ("hostile: call starts, no ends", "many bare JSON calls in prose"):
        print(f"\ngrowth ({shape}):")
        for size in (MB // 4, MB // 2, MB, 2 * MB):
            text = SHAPES[shape](size)
            best, median, calls = timings(text, runs)
            print(f"{'':<34}{len(text):>11,}{calls:>8,}{best:>10.1f}{median:>11.1f}")


if __name__ == "__main__":
    main()
