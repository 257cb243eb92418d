"""The shell family: the shell and execute_code tools, the command classifier (safety/), the
read-only list, and the terminal backends commands run on (terminal/).

`classify` is re-exported here, loaded on first use so importing a terminal backend does not
load the classifier's rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tools.shell.safety import classify

__all__ = ["classify"]


def __getattr__(name: str) -> Any:
    if name == "classify":
        from tools.shell.safety import classify

        return classify
    raise AttributeError(name)
