"""What a webhook POST must be before anything reads it: signed by the app secret
(X-Hub-Signature-256, HMAC-SHA256 of the raw bytes), then JSON of the shape Meta sends.

Refusals are 4xx: 401 for a missing or wrong signature (the body is not parsed), 400 for a
signed body that is not a WhatsApp notification. Nothing here raises.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from gateway.sdk import parse_json

SIGNATURE_HEADER = "X-Hub-Signature-256"
_STATUSES = frozenset({"sent", "delivered", "read", "failed", "deleted", "warning"})


def signed(app_secret: bytes, raw: bytes, header: str) -> bool:
    """Whether `header` is `sha256=<hex HMAC of raw with the app secret>` (constant time)."""
    if not app_secret or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(app_secret, raw, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode("utf-8", "replace"))


def parse_body(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """(the body, "") or (None, what is wrong with it)."""
    try:
        body = parse_json(raw)
    except ValueError as exc:
        return None, f"body is not JSON ({exc})"[:120]
    problem = shape_problem(body)
    return (None, problem) if problem else (body, "")


def shape_problem(body: Any) -> str:
    """What is wrong with a parsed notification ("" when nothing is): normalize.py reads
    these fields assuming their types."""
    if not isinstance(body, dict):
        return "body is not a JSON object"
    if body.get("object") != "whatsapp_business_account":
        return "object is not whatsapp_business_account"
    entries = body.get("entry")
    if not isinstance(entries, list) or not _objects(entries):
        return "entry is not a list of objects"
    for entry in entries:
        changes = entry.get("changes")
        if not _objects(changes):
            return "changes is not a list of objects"
        for change in changes:
            value = change.get("value")
            if change.get("field") != "messages":
                continue
            if not isinstance(value, dict):
                return "a messages change without a value object"
            if problem := _value_problem(value):
                return problem
    return ""


def _value_problem(value: dict[str, Any]) -> str:
    if not isinstance(value.get("metadata", {}), dict):
        return "metadata is not an object"
    for name in ("contacts", "messages", "statuses"):
        if name in value and not _objects(value[name]):
            return f"{name} is not a list of objects"
    for contact in value.get("contacts") or ():
        profile = contact.get("profile", {})
        if not isinstance(profile, dict) or not isinstance(profile.get("name", ""), str):
            return "a contact whose profile is not an object with a name"
    for message in value.get("messages") or ():
        if not (_strings(message, "from", "id") and isinstance(message.get("type"), str)):
            return "a message without from, id and type"
        if not message["from"].isdigit():
            return "a message from something that is not a number"
        kind = message["type"]
        if kind in message and not isinstance(message[kind], dict):
            return f"a {kind} message whose {kind} is not an object"
        for name in ("context", "interactive"):
            if name in message and not isinstance(message[name], dict):
                return f"a message whose {name} is not an object"
        interactive = message.get("interactive") or {}
        for name in ("button_reply", "list_reply"):
            if name in interactive and not isinstance(interactive[name], dict):
                return f"an interactive reply whose {name} is not an object"
    for status in value.get("statuses") or ():
        if not _strings(status, "id", "status") or status["status"] not in _STATUSES:
            return "a status without an id and a known status"
        if "errors" in status and not _objects(status["errors"]):
            return "a status whose errors are not a list of objects"
    return ""


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _strings(data: dict[str, Any], *names: str) -> bool:
    return all(isinstance(data.get(name), str) and data[name] for name in names)
