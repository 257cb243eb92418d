"""Tool names the model sees for MCP tools: `mcp_<server>_<tool>`, in the characters and length
LLM APIs accept, stable across restarts and unique within a server."""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp"
MAX_LENGTH = 64  # OpenAI's limit for function names (the strictest common one)
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]+")


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """The model-facing name of `tool` on `server`; `taken` holds the names already given to
    that server's other tools and receives this one."""
    raw = f"{PREFIX}_{server}_{tool}"
    name = _NOT_ALLOWED.sub("_", raw)
    if len(name) > MAX_LENGTH or name in taken:
        # Cut and tag with a hash of the exact original, so two long or clashing names differ
        # and each keeps the same name every time the server lists it.
        tag = hashlib.sha256(raw.encode()).hexdigest()[:8]
        name = f"{name[: MAX_LENGTH - len(tag) - 1]}_{tag}"
    taken.add(name)
    return name
