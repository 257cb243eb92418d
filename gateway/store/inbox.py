"""The durable session inbox: messages stored at intake, run as turns by any process.

Both store backends implement the same four operations on it (gateway/store/base.py),
each one atomic and one round trip:

- `intake`: claim the platform event id (dedupe), count the rate limit, append the
  message to its session's pending list and mark the session ready; when the session's
  lease is free and the caller has room for a turn, take the lease and return the turn
  to run (with the session's history) in the same step.
- `claim`: take the lease of the oldest ready session whose lease is free (nobody is
  running it, or its holder died and the lease expired) and return its oldest message.
- `finish`: end a turn: write its history, drop its message from the pending list, and
  either keep the lease and return the next message, or release the lease.
- `drop_pending`: `/stop` drops what waits.

Every take of a lease (intake, claim, finish handing on the next entry) bumps the session's
fence: a number that only grows. A turn carries the fence it was taken with (`Claimed.token`)
and each of its effects checks it in the same atomic step (`finish`, `claim_reply`,
`fenced_write`): a run whose lease lapsed and was taken over finds its token stale and writes
nothing, so two runs of one message can never both reply or both save.

A message leaves the pending list only when its turn finishes, so a process that dies
mid-turn loses nothing: the lease expires and another process claims the message again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class InboxEntry:
    id: str  # stable across re-runs: turn ids and reply records derive from it
    payload: str  # the message as JSON

    def encode(self) -> str:
        return f"{self.id}\n{self.payload}"

    @classmethod
    def decode(cls, raw: str) -> InboxEntry:
        entry_id, _, payload = raw.partition("\n")
        return cls(entry_id, payload)


@dataclass(frozen=True)
class IntakeRequest:
    session: str  # SessionKey as text
    entry: InboxEntry
    seen: str | None  # the dedupe key to claim; None when the caller claimed it already
    seen_ttl: float
    max_queued: int  # per session
    max_total: int  # across every session
    rate_key: str | None = None  # count this message here (replicas share the count)
    rate_limit: int = 0
    rate_ttl: float = 120.0
    lease_owner: str | None = None  # take the free lease for this owner (None: do not)
    lease_ttl: float = 5.0


@dataclass(frozen=True)
class Claimed:
    """A turn this process now runs: the session's lease is held under `owner`."""

    session: str
    entry: InboxEntry
    record: str | None  # the session's stored history (None: a new session)
    owner: str
    attempt: int = 1  # above 1: it was started before, by a process that died
    reply: str | None = None  # set when that earlier run already claimed the reply slot
    token: int = 0  # the session's fence when this lease was taken (0: taken before fences)


IntakeStatus = Literal["stored", "duplicate", "rate_limited", "queue_full", "overloaded"]


@dataclass(frozen=True)
class IntakeResult:
    status: IntakeStatus
    rate_count: int | None = None
    queued: int = 0  # the session's pending messages, this one included
    holder: str | None = None  # the lease holder, when the lease was not taken
    claimed: Claimed | None = None  # the lease was taken: run this turn now
    notice: bool = False  # the first message queued behind the holder's running turn


@dataclass(frozen=True)
class FinishResult:
    status: Literal["released", "next", "lost"]
    next: Claimed | None = None  # status "next": the lease is kept for this turn


@dataclass(frozen=True)
class HeldLease:
    """A session lease this process renews: its owner and the fence it was taken with."""

    session: str
    owner: str
    token: int


@dataclass(frozen=True)
class ReplyClaim:
    """The answer to `claim_reply`: "claimed" (send now), "taken" (a run claimed the slot
    before: `existing` is its record, send nothing) or "stale" (the lease was taken over)."""

    status: Literal["claimed", "taken", "stale"]
    existing: str | None = None
