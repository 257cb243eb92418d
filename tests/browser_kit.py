"""Calling the browser tools the way the agent does, for the browser tests and benchmark."""

from __future__ import annotations

from typing import Any

from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolError, ToolSpec
from gateway.sessions.key import SessionKey
from tools.web.browser import BrowserManager
from tools.web.browser.tools import BrowserActions


def chat(name: str, user_text: str = "") -> ToolContext:
    """The tool context of a turn in chat `name`; `user_text` is what the person wrote."""
    return ToolContext(
        session=SessionKey("console", name),
        chat=ChatRef(platform="console", chat_id=name),
        user=UserRef(platform="console", user_id="ana"),
        user_text=user_text,
    )


class Tools:
    """The browser tools of one manager; a ToolError comes back as "error: ..." text."""

    def __init__(self, manager: BrowserManager) -> None:
        self.manager = manager
        self.specs: dict[str, ToolSpec[Any]] = {t.name: t for t in BrowserActions(manager).specs()}

    async def __call__(self, ctx: ToolContext, name: str, **args: Any) -> str:
        spec = self.specs[name]
        try:
            return str(await spec.handler(spec.args(**args), ctx))
        except ToolError as exc:
            return f"error: {exc}"

    async def need(self, ctx: ToolContext, name: str, **args: Any) -> ApprovalNeed | None:
        spec = self.specs[name]
        assert spec.approval is not None
        return await spec.approval(spec.args(**args), ctx)
