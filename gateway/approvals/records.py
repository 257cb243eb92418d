"""An approval request, the decision on it, and how each reads in the chat."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from gateway.sdk.callbacks import CallbackData
from gateway.sdk.messages import ChatRef, SentRef, UserRef

Choice = Literal["once", "session", "always", "deny", "expired"]
# Platforms whose chats have no person to press a button: the one who sent the request there
# (an API key) is a program as often as a person, so its requests are decided by operators
# (the console, or the prompt gateway/web/relay.py sends to the admins), never from there.
UNATTENDED = ("api",)

# The choices a button makes ("expired" is the gateway's own, after the wait ran out).
PressedChoice = Literal["once", "session", "always", "deny"]


@dataclass
class ApprovalRequest:
    id: str
    tool: str
    command: str
    reason: str
    cwd: str | None
    shape: str
    session: str
    chat: dict[str, Any]
    requester: dict[str, Any]
    created: float
    expires: float
    owner: str  # instance id of the process whose turn waits for the answer
    message: dict[str, Any] | None = None  # SentRef of the prompt, to edit it later
    where: str = ""  # where the command runs ("in the sandbox"); empty in older records
    untrusted: str = ""  # outside content that entered the turn before this call, if any
    admins_only: bool = False  # only an admin may decide (ApprovalNeed.admins_only)
    standing: bool = True  # may be approved for the session or always (ApprovalNeed.standing)

    @property
    def chat_ref(self) -> ChatRef:
        return ChatRef.model_validate(self.chat)

    @property
    def requester_ref(self) -> UserRef:
        return UserRef.model_validate(self.requester)

    @property
    def sent_ref(self) -> SentRef | None:
        return SentRef.model_validate(self.message) if self.message else None


@dataclass(frozen=True)
class ApprovalChoice(CallbackData, prefix="ap"):
    """An approval button: which request, and which choice the button makes."""

    request_id: str
    choice: PressedChoice


@dataclass(frozen=True)
class Decision:
    choice: Choice
    by: str = ""  # label of the person who decided
    by_address: str = ""
    reason: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> Decision:
        return cls(**json.loads(raw))

    @property
    def approved(self) -> bool:
        return self.choice in ("once", "session", "always")


def prompt_text(request: ApprovalRequest, *, always: bool, always_days: float = 0) -> str:
    """The prompt; `always_days`: how long an "always" approval lasts (0: until revoked)."""
    expires = datetime.fromtimestamp(request.expires, UTC).strftime("%H:%M:%S UTC")
    minutes = max(round((request.expires - request.created) / 60), 1)
    where = f"\nIn: `{request.cwd}`" if request.cwd else ""
    runs = f"\nRuns {request.where}." if request.where else ""
    warning = (
        f"\nCaution: this comes after outside content ({request.untrusted}) entered the "
        "conversation; make sure it is what you asked for."
        if request.untrusted
        else ""
    )
    standing = "for the session or always" if always else "for the session"
    exactly = f"`{request.shape}`" if request.shape != request.command else "this exact call"
    covers = f"\nApproving {standing} covers only {exactly} for {request.requester_ref.label}."
    if always:
        days = "1 day" if always_days == 1 else f"{always_days:g} days"
        covers += f" Always lasts {days}." if always_days else " Always lasts until revoked."
    if not request.standing:
        covers = (
            "\nThis can only be approved once: what it touches is only known when it runs, "
            "so it asks each time."
        )
    return (
        f"**Approval needed** ({request.tool})\n"
        f"```\n{request.command}\n```\n"
        f"Why: {request.reason}{where}{runs}{warning}\n"
        f"Asked by {request.requester_ref.label}; expires at {expires} (in {minutes} min)."
        f"{covers}\n{_replies(request)}"
    )


def _replies(request: ApprovalRequest) -> str:
    if request.chat_ref.platform in UNATTENDED:
        return f"Or reply `/deny {request.id} [reason]` to withdraw it."
    return f"Or reply `/approve {request.id}` or `/deny {request.id} [reason]`."


def decided_text(request: ApprovalRequest, decision: Decision) -> str:
    command = f"\n```\n{request.command}\n```"
    return f"{outcome_text(decision)[:1].upper()}{outcome_text(decision)[1:]}.{command}"


def outcome_text(decision: Decision) -> str:
    if decision.choice == "once":
        return f"approved by {decision.by}"
    if decision.choice == "session":
        return f"approved by {decision.by} for this session"
    if decision.choice == "always":
        return f"approved by {decision.by}, always in this chat"
    if decision.choice == "deny":
        reason = f": {decision.reason}" if decision.reason else ""
        return f"denied by {decision.by}{reason}"
    return f"expired, not run ({decision.reason})"
