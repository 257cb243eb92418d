"""The shape of a text approved exactly as shown: what "for this session" remembers for a
command the classifier cannot narrow down, a script or an MCP call. Kept apart from the
classifier so the tools that use it do not load it."""

from __future__ import annotations

import hashlib


def exact(text: str) -> str:
    """A shape only the same text has (long text is cut and fingerprinted)."""
    text = text.strip()
    if len(text) <= 400:
        return text
    return text[:300] + " …#" + hashlib.sha256(text.encode()).hexdigest()[:16]
