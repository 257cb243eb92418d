"""What an Events API request must be before Bolt reads it: signed, with a numeric timestamp,
and a body of the shape Slack sends. Anything else is refused here with a 4xx; Bolt would
answer it with a 500 and a traceback (it parses the body, and the timestamp, unchecked)."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from slack_bolt.request.internals import parse_body
from slack_sdk.signature import SignatureVerifier

from gateway.sdk import too_deep

log = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
SIGNATURE_HEADER = "X-Slack-Signature"
_MAX_AGE_SECONDS = 60 * 5  # as Bolt: an older signed request may be a replay


def refusal(
    verifier: SignatureVerifier, headers: Mapping[str, str], content_type: str, raw: bytes
) -> web.Response | None:
    """The response refusing this request, or None when Bolt may handle it.

    Authentication comes first, so an unsigned body is never parsed: 401 for a missing or
    non-numeric timestamp and for a bad signature (Bolt checks a good one again, which costs
    one HMAC), then 400 for a signed body that is not what Slack sends.
    """
    timestamp = headers.get(TIMESTAMP_HEADER, "")
    if not (timestamp.isascii() and timestamp.isdigit()):
        return _refuse(401, "invalid request", "missing or non-numeric timestamp")
    if not signed(verifier, raw, timestamp, headers.get(SIGNATURE_HEADER, "")):
        return _refuse(401, "invalid request", "missing, wrong or expired signature")
    try:
        body: Any = parse_body(raw.decode("utf-8"), content_type)
    except ValueError:  # invalid UTF-8, or JSON that does not parse
        return _refuse(400, "malformed body", "body is not JSON or form data")
    except RecursionError:
        return _refuse(400, "malformed body", "JSON nested too deep")
    if too_deep(body):
        return _refuse(400, "malformed body", "JSON nested too deep")
    problem = shape_problem(body)
    return _refuse(400, "malformed body", problem) if problem else None


def signed(verifier: SignatureVerifier, raw: bytes, timestamp: str, signature: str) -> bool:
    """Slack's v0 signature over the raw bytes, within five minutes. The SDK's own check
    decodes the body as UTF-8 first, so a body that is not would raise before the signature
    is known to be good."""
    if abs(verifier.clock.now() - int(timestamp)) > _MAX_AGE_SECONDS:
        return False
    base = b"v0:" + timestamp.encode() + b":" + raw
    digest = hmac.new(verifier.signing_secret.encode(), base, hashlib.sha256).hexdigest()
    return hmac.compare_digest(f"v0={digest}", signature)


def shape_problem(body: Any) -> str:
    """What is wrong with a parsed request body ("" when nothing is): Bolt reads fields of
    the envelope, and of its `event`, assuming they are objects."""
    if not isinstance(body, dict):
        return f"body is a JSON {_json_type(body)}, not an object"
    authorizations = body.get("authorizations")
    if authorizations is not None and not (
        isinstance(authorizations, list) and all(isinstance(a, dict) for a in authorizations)
    ):
        return "authorizations is not a list of objects"
    if body.get("type") == "event_callback":
        event = body.get("event")
        if not isinstance(event, dict):
            return f"event_callback with an event that is a JSON {_json_type(event)}"
        if not isinstance(event.get("type"), str):
            return "event without a type"
        if event["type"] in _MESSAGE_EVENTS and not _strings(event, "channel", "ts"):
            return f"{event['type']} event without a channel and ts"
        files = event.get("files")
        if files is not None and not (
            isinstance(files, list) and all(isinstance(f, dict) for f in files)
        ):
            return "event whose files are not a list of objects"
    if "command" in body and not _strings(body, "channel_id", "user_id"):
        return "slash command without a channel_id and user_id"
    kind = body.get("type")
    if kind in _ACTION_PAYLOADS and "actions" in body:
        actions = body["actions"]
        if not (
            isinstance(actions, list)
            and actions
            and all(isinstance(a, dict) and isinstance(a.get("action_id"), str) for a in actions)
        ):
            return f"{kind} whose actions are not objects with an action_id"
    return ""


# The events the listeners turn into messages; they read these fields without a default.
_MESSAGE_EVENTS = ("message", "app_mention")
# Button presses: Bolt matches the first action's `action_id` with no default.
_ACTION_PAYLOADS = ("block_actions", "interactive_message")


def _strings(data: dict[str, Any], *names: str) -> bool:
    return all(isinstance(data.get(name), str) for name in names)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", str: "string", list: "array", dict: "object"}.get(
        type(value), "number"
    )


def _refuse(status: int, error: str, why: str) -> web.Response:
    log.warning("slack events request refused status=%d reason=%r", status, why)
    return web.json_response({"error": error}, status=status)
