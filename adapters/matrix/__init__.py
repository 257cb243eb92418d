"""Matrix adapter: matrix-nio inside the gateway (DMs, rooms, threads, encrypted rooms).

The gateway finds it through `adapters.matrix.plugin`; importing this package does not
import matrix-nio until the adapter class is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MatrixAdapter", "MatrixStartError"]


def __getattr__(name: str) -> Any:
    if name == "MatrixAdapter":
        from adapters.matrix.adapter import MatrixAdapter

        return MatrixAdapter
    if name == "MatrixStartError":
        from adapters.matrix.client import MatrixStartError

        return MatrixStartError
    raise AttributeError(name)
