"""The console's web machinery that the web chat and the API reuse: pages and templates,
browser sign-in, served files, the live transcript of a web conversation."""

from __future__ import annotations

from gateway.web import auth
from gateway.web.auth import BrowserSession, same
from gateway.web.files import WebFiles
from gateway.web.info import InfoTable
from gateway.web.pages import (
    SECURITY_HEADERS,
    Streams,
    Templates,
    gone,
    page,
    redirect,
    static_handler,
)
from gateway.web.settings import WebSettings, check_name, masked_keys
from gateway.web.signin import TOO_MANY, SignIn
from gateway.web.transcript import ChatMessage, LiveHub, MessageLog, deleted, edited, new_id, sent

__all__ = [
    "SECURITY_HEADERS",
    "TOO_MANY",
    "BrowserSession",
    "ChatMessage",
    "InfoTable",
    "LiveHub",
    "MessageLog",
    "SignIn",
    "Streams",
    "Templates",
    "WebFiles",
    "WebSettings",
    "auth",
    "check_name",
    "deleted",
    "edited",
    "gone",
    "masked_keys",
    "new_id",
    "page",
    "redirect",
    "same",
    "sent",
    "static_handler",
]
