"""The one storage interface the core uses; Redis and the embedded store implement it.

Values are strings (callers JSON-encode); keys are plain names without any
prefix (backends add their own namespace). Every method may raise
`StoreUnavailable` when the backend cannot be reached after its own retries.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.store.inbox import (
    Claimed,
    FinishResult,
    HeldLease,
    InboxEntry,
    IntakeRequest,
    IntakeResult,
    ReplyClaim,
)
from gateway.store.keys import reply as reply_key
from gateway.store.search import SearchDoc, SearchIndex

# How long a store keeps the id of a write (an increment, an append): the same write sent
# again within this long changes nothing.
ONCE_SECONDS = 600.0


class StoreUnavailable(Exception):
    """The backend could not be reached (after retries). Callers may retry later."""


class StoreRefused(StoreUnavailable):
    """The backend refused the username or password, or a certificate in the TLS handshake
    (the server's not trusted here, or this client's not given or not trusted there):
    retrying will not help, fixing the settings the message names will."""


class StoreLocked(StoreUnavailable):
    """Another process already uses this embedded store's directory."""


@dataclass
class Batch:
    """Independent operations sent to the store together: one round trip on Redis.

    Each behaves exactly like the Store method of the same name and the results come
    back in order. A batch is not a transaction: use it to save round trips on a hot
    path, never for atomicity.
    """

    ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)

    def get(self, key: str) -> Batch:
        self.ops.append(("get", (key,), {}))
        return self

    def set(
        self, key: str, value: str, *, ttl: float | None = None, only_if_absent: bool = False
    ) -> Batch:
        self.ops.append(("set", (key, value), {"ttl": ttl, "only_if_absent": only_if_absent}))
        return self

    def incr(
        self, key: str, amount: int = 1, *, ttl: float | None = None, once: str | None = None
    ) -> Batch:
        self.ops.append(("incr", (key, amount), {"ttl": ttl, "once": once}))
        return self

    def hset(self, name: str, field: str, value: str) -> Batch:
        self.ops.append(("hset", (name, field, value), {}))
        return self

    def acquire_lease(self, name: str, owner: str, ttl: float) -> Batch:
        self.ops.append(("acquire_lease", (name, owner, ttl), {}))
        return self

    def renew_lease(self, name: str, owner: str, ttl: float) -> Batch:
        self.ops.append(("renew_lease", (name, owner, ttl), {}))
        return self

    def release_lease(self, name: str, owner: str) -> Batch:
        self.ops.append(("release_lease", (name, owner), {}))
        return self

    def lease_owner(self, name: str) -> Batch:
        self.ops.append(("lease_owner", (name,), {}))
        return self


class Store(ABC):
    """Async key/value, hash, list, lease and pub/sub primitives.

    Semantics every backend must keep (tests/unit/test_store_contract.py checks both):
    - `set(..., only_if_absent=True)` is atomic: of concurrent callers exactly one gets True.
    - TTLs are in seconds (floats allowed, must be > 0, else ValueError); an expired key
      reads as absent. A key holds one kind of data (value, hash or list).
    - Leases are owned by a token; renew/release by another token fail and change nothing.
    - `publish` reaches every current `listen` on that channel in every process sharing
      the backend (the embedded store is single-process, so only this process).
    """

    # -- plain values ---------------------------------------------------------------

    @abstractmethod
    async def get(self, key: str) -> str | None: ...

    @abstractmethod
    async def set(
        self, key: str, value: str, *, ttl: float | None = None, only_if_absent: bool = False
    ) -> bool:
        """Store a value; returns False only when `only_if_absent` and the key exists."""

    @abstractmethod
    async def delete(self, *keys: str) -> int:
        """Delete keys (values, hashes or lists); returns how many existed."""

    @abstractmethod
    async def incr(
        self, key: str, amount: int = 1, *, ttl: float | None = None, once: str | None = None
    ) -> int:
        """Add to an integer value (missing = 0). `ttl` applies when the key is created.

        An increment counts once: sent again after its reply was lost, it adds nothing. With
        `once` (an id its caller keeps) that holds when the caller sends it again too, for at
        least ONCE_SECONDS: the same id again adds nothing and returns the value."""

    @abstractmethod
    async def expire(self, key: str, ttl: float) -> bool:
        """Set a TTL on an existing key of any type; False when it does not exist."""

    # -- hashes: small maps such as job specs or pending approvals ------------------

    @abstractmethod
    async def hset(self, name: str, field: str, value: str) -> None: ...

    @abstractmethod
    async def hget(self, name: str, field: str) -> str | None: ...

    @abstractmethod
    async def hdel(self, name: str, *fields: str) -> int: ...

    @abstractmethod
    async def hgetall(self, name: str) -> dict[str, str]: ...

    # -- lists: append-only logs (audit, job runs, group context) -------------------

    @abstractmethod
    async def push(self, key: str, value: str, *, max_len: int | None = None) -> int:
        """Append at the tail; with `max_len` (>= 1) keep the newest max_len. Returns the length.
        An append sent again after its reply was lost appends nothing."""

    @abstractmethod
    async def list_range(self, key: str, start: int = 0, end: int = -1) -> list[str]:
        """Items from `start` to `end` inclusive; negative indexes count from the tail."""

    # -- leases: one holder at a time across processes ------------------------------

    @abstractmethod
    async def acquire_lease(self, name: str, owner: str, ttl: float) -> bool:
        """Take the lease if free (or already ours, which refreshes it)."""

    @abstractmethod
    async def renew_lease(self, name: str, owner: str, ttl: float) -> bool:
        """Extend our lease; False when it expired or someone else holds it."""

    @abstractmethod
    async def release_lease(self, name: str, owner: str) -> bool:
        """Release our lease; False when we no longer held it."""

    @abstractmethod
    async def lease_owner(self, name: str) -> str | None: ...

    # -- notifications between processes -------------------------------------------

    @abstractmethod
    async def publish(self, channel: str, message: str) -> None: ...

    @abstractmethod
    def listen(self, channel: str) -> AsyncGenerator[str, None]:
        """Yield messages published on `channel` from now on, until the caller stops iterating.

        Survives backend outages: the iterator reconnects instead of ending. Messages
        published while disconnected are lost, so callers treat them as hints and keep
        the truth in keys.

        The subscription is made on the first `__anext__` and takes a moment on Redis, so
        callers wait with a timeout and re-read their key on every wake-up: an event published
        in that moment (or during an outage) then costs one timeout, not the event. Both
        backends return an async generator: close it (`contextlib.aclosing`) or cancel the
        consuming task to unsubscribe. It ends when the store is closed.
        """

    # -- the session inbox (gateway/store/inbox.py): durable intake and turns -------------

    @abstractmethod
    async def intake(self, request: IntakeRequest) -> IntakeResult:
        """Dedupe, rate-count and store a message; maybe take its session's lease (atomic).

        The same request sent again while its entry is pending (its first answer was lost,
        e.g. with a failed-over master) stores nothing twice and answers as the first time:
        stored, with the run when the first took the lease (same token, attempt not counted
        again). Another entry under a dedupe key already taken is "duplicate"."""

    @abstractmethod
    async def claim(
        self, owner: str, lease_ttl: float, *, scan: int = 64, limit: int = 1
    ) -> list[Claimed]:
        """Take the leases of up to `limit` of the oldest ready sessions nobody holds (looking
        at `scan` of them at most), oldest first; [] when there is none. `owner` names this
        one claim: on Redis, the claim sent again by the client (its first answer lost with a
        failed-over master) gets back the sessions it took, counted once."""

    @abstractmethod
    async def finish(
        self,
        session: str,
        entry_id: str,
        owner: str,
        writes: Batch,
        *,
        keep: bool,
        lease_ttl: float,
        record: str | None = None,
        index: SearchDoc | None = None,
        token: int | None = None,
        absorbed: tuple[str, ...] = (),
    ) -> FinishResult:
        """End a turn: run `writes` (set / hset only), drop its entry and the `absorbed` ones
        (later messages the turn took in while it ran), then hand back the next
        entry under the kept lease (`keep`) or release it. Nothing is written when another
        process holds the lease now, or, with `token`, when the session's fence moved past it
        ("lost"). `record` is the history `writes` saved, returned with the next entry.
        `index` is the turn's search document, stored with the turn (a /forget waiting for
        the turn to end finds it). The same finish sent again (its first answer lost, e.g.
        with a failed-over master) gets the first answer: its entry is gone and the fence
        moved by exactly one, to the next entry's token under the kept lease (taken back
        when it lapsed meanwhile, as a renewal would) or with the release; nothing is
        written twice."""

    @abstractmethod
    async def renew_sessions(self, held: list[HeldLease], ttl: float) -> list[bool]:
        """Renew session leases in one round trip; False for each one whose fence moved on
        (taken over). A lease that lapsed but nobody took is taken back."""

    @abstractmethod
    async def claim_reply(
        self, session: str, token: int, entry_id: str, value: str, ttl: float
    ) -> ReplyClaim:
        """Claim the reply slot of a stored message (`keys.reply(entry_id)`, set to `value`)
        when the session's fence still equals `token`, atomically: of two runs of one message,
        at most one ever gets "claimed". A slot that holds `value` already is this claim sent
        again (its first reply was lost, e.g. with a failed-over master) and is "claimed" too,
        even when the fence has moved on since: each run's `value` names its own token, so the
        slot was taken by this run while its token held, and only this run may send. Answered
        "stale" instead, it would send nothing, and the run that took over would find the
        slot claimed and send nothing either."""

    async def record_reply(self, session: str, entry_id: str, value: str, ttl: float) -> None:
        """Fill the reply slot of a stored message of `session` with what was sent (on Redis
        Cluster the slot lives with the session's keys, so it is named through the session)."""
        await self.set(reply_key(entry_id), value, ttl=ttl)

    @abstractmethod
    async def fenced_write(self, session: str, token: int, writes: Batch) -> bool:
        """Run `writes` (set with an optional ttl, hset) only when the session's fence still
        equals `token`, atomically; False (nothing written) when it moved on."""

    @abstractmethod
    async def inbox_stats(self) -> tuple[int, float]:
        """(messages pending across every session, seconds the longest-waiting session that
        nobody runs has waited), for the queue metrics."""

    @abstractmethod
    async def pending(self, session: str) -> list[InboxEntry]:
        """The session's stored messages that have not finished, oldest first."""

    @abstractmethod
    async def remove_pending(self, session: str, entry_id: str) -> bool:
        """Remove one stored message that was answered another way (e.g. as the answer to a
        question a running turn asked); False when it is not there."""

    @abstractmethod
    async def replace_pending(self, session: str, message_id: str, payload: str) -> bool:
        """Give the stored message whose platform id (the payload's `message_id`) is
        `message_id` a new payload (an edit), atomically, while no turn has used it: it is
        not the first message of a session whose lease is held, and no running turn took it
        in (`keys.joined`). False (nothing changed) otherwise."""

    @abstractmethod
    async def drop_pending(self, session: str) -> int:
        """Drop every stored message of the session (a running turn still finishes)."""

    # -- the search index of past turns (gateway/store/search.py) ------------------------

    @property
    @abstractmethod
    def search(self) -> SearchIndex:
        """Full-text index of past turns; both backends return the same results."""

    # -- lifecycle ------------------------------------------------------------------

    async def open(self) -> None:  # noqa: B027 - optional: Redis connects on first use
        """Take hold of the backend before first use: the embedded store opens its file and
        takes its lock here when it was built with `open_now=False`."""

    @abstractmethod
    async def ping(self) -> None:
        """Raise StoreUnavailable when the backend is not usable."""

    @abstractmethod
    async def close(self) -> None: ...

    def lease_renewal_twin(self) -> Callable[[], Store] | None:
        """What the lease renewal thread opens on its own event loop to renew this store's
        session leases (a store on its own connection, closed by that thread; or this store
        itself when its `renew_sessions` is safe from another thread). None: renew on the
        main loop."""
        return None

    def abandon(self) -> None:  # noqa: B027 - optional: only stores holding a lock need it
        """Let go of what the store holds without waiting (the gateway failed to start and
        no event loop may run): the embedded store's file lock, for one."""

    @property
    @abstractmethod
    def shared(self) -> bool:
        """True when other processes may use the same data (Redis)."""

    # -- batches ---------------------------------------------------------------------

    async def run(self, batch: Batch) -> list[Any]:
        """Run a batch's operations and return their results in order.

        This default runs them one after another, which is right for a local store;
        Redis sends them in one pipeline.
        """
        return [await getattr(self, name)(*args, **kwargs) for name, args, kwargs in batch.ops]

    # -- JSON helpers ----------------------------------------------------------------

    async def get_json(self, key: str) -> Any:
        raw = await self.get(key)
        return None if raw is None else json.loads(raw)

    async def set_json(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        await self.set(key, json.dumps(value, ensure_ascii=False, separators=(",", ":")), ttl=ttl)
