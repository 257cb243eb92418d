"""The core's buttons as Mattermost interactive message buttons, each with a secret of its own.

A button is a message attachment action whose integration URL is this gateway's
`/mattermost/actions/{tag}`; Mattermost posts its `context` back when someone presses it.
The context holds the button's data, where it was sent, and an HMAC of both under the
adapter's key: a press is believed only when that secret verifies, so nobody who can reach
the URL can invent one. The tag (an HMAC of a fixed label under the same key) lets the
endpoint refuse a request that does not come from one of these buttons before reading its
body. Mattermost never shows a post's integration URL or context to its clients.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.mattermost.normalize import PLATFORM
from gateway.sdk import Button, ChatKind, ChatRef

ACTIONS_PATH = "/mattermost/actions"
_STYLES = {"primary": "primary", "danger": "danger", "secondary": "default"}
_KEY_LABEL = b"chatgate mattermost button secrets"
_URL_LABEL = b"chatgate mattermost actions url"
_KIND_NAMES = frozenset(kind.value for kind in ChatKind)


@dataclass(frozen=True)
class SignedAction:
    """What a verified context says: the button's data and the chat it was sent in."""

    data: str
    chat: ChatRef


class ActionSigner:
    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def from_settings(cls, action_secret: str, token: str) -> ActionSigner:
        """The configured key, else one derived from the bot token (the same on every replica)."""
        if action_secret:
            return cls(action_secret.encode())
        return cls(hmac.new(token.encode(), _KEY_LABEL, hashlib.sha256).digest())

    def url_tag(self) -> str:
        """The last part of the buttons' URL, the same for every button of this key."""
        return hmac.new(self._key, _URL_LABEL, hashlib.sha256).hexdigest()[:32]

    def context(self, data: str, chat: ChatRef) -> dict[str, str]:
        fields = _fields(data, chat)
        return {**fields, "secret": self._secret(fields)}

    def verify(self, context: object, channel_id: str) -> SignedAction | None:
        """The action a press's context names, or None when its secret does not verify or it
        was sent to another channel than the press came from."""
        if not isinstance(context, Mapping):
            return None
        fields = {name: context.get(name) for name in ("data", "channel", "thread", "kind")}
        secret = context.get("secret")
        if not all(isinstance(v, str) for v in fields.values()) or not isinstance(secret, str):
            return None
        if not hmac.compare_digest(self._secret(fields), secret):
            return None
        if fields["channel"] != channel_id or fields["kind"] not in _KIND_NAMES:
            return None
        chat = ChatRef(
            platform=PLATFORM,
            chat_id=str(fields["channel"]),
            thread_id=str(fields["thread"]) or None,
            kind=ChatKind(fields["kind"]),
        )
        return SignedAction(data=str(fields["data"]), chat=chat)

    def _secret(self, fields: Mapping[str, Any]) -> str:
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()


def _fields(data: str, chat: ChatRef) -> dict[str, str]:
    return {
        "data": data,
        "channel": chat.chat_id,
        "thread": chat.thread_id or "",
        "kind": str(chat.kind),
    }


def button_props(
    rows: tuple[tuple[Button, ...], ...], chat: ChatRef, signer: ActionSigner, public_url: str
) -> dict[str, Any]:
    """The post props that show `rows` as buttons (one attachment per row)."""
    url = f"{public_url.rstrip('/')}{ACTIONS_PATH}/{signer.url_tag()}"
    attachments = []
    number = 0
    for row in rows:
        actions = []
        for button in row:
            actions.append(
                {
                    "id": f"cg{number}",
                    "name": button.label,
                    "type": "button",
                    "style": _STYLES[button.style],
                    "integration": {"url": url, "context": signer.context(button.data, chat)},
                }
            )
            number += 1
        attachments.append({"text": "", "actions": actions})
    return {"attachments": attachments}
