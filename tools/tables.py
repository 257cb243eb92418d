"""Plain-text tables for the tools' CLI commands (`chatgate tools`, `chatgate mcp`)."""

from __future__ import annotations

from collections.abc import Sequence


def short(description: str, width: int = 70) -> str:
    first = description.strip().split("\n", 1)[0].split(". ")[0].rstrip(".")
    return first if len(first) <= width else first[: width - 1] + "…"


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    for row in (header, *rows):
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join(cells).rstrip())
