"""The /sync loop, run by one replica at a time, that moves the sync token only past events
the gateway has stored.

The token lives in the gateway's store, so the replica that takes over the sync lease goes on
where the last one stopped. A response whose messages were not all stored is fetched again
from the old token (admission deduplicates what was stored). The first sync of an account
with no token skips the rooms' history: the bot answers what is written after it started.
Each leader's first sync asks for the full state, so nio knows the rooms (members,
encryption) it needs to encrypt to them.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from nio import AsyncClient, SyncResponse

from adapters.matrix.client import share_keys
from adapters.matrix.intake import SyncIntake
from gateway.sdk import SPREAD, Backoff, Store, StoreUnavailable, keys, stop_task

log = logging.getLogger(__name__)

# After a failed /sync: 1 s, then half as long again each time, at most 30 s.
_BACKOFF = Backoff(1.0, cap=30.0, factor=1.5, jitter=SPREAD)
_NOT_STORED_PAUSE = 1.0  # before fetching again events the store could not take
# Timeline events per room in one response; more since the token and the rest is fetched
# with /messages (see _fill_gaps).
_FILTER = {
    "presence": {"types": []},
    "room": {"timeline": {"limit": 50}, "state": {"lazy_load_members": False}},
}
_GAP_PAGES = 20  # /messages pages (of 100) fetched to fill one room's gap


class SyncCursor:
    def __init__(self, store: Store, account: str) -> None:
        self._store = store
        self._key = keys.platform_cursor("matrix", account)

    async def load(self) -> str | None:
        return await self._store.get(self._key)

    async def save(self, token: str) -> None:
        await self._store.set(self._key, token)


class Syncer:
    def __init__(
        self, client: AsyncClient, intake: SyncIntake, cursor: SyncCursor, *, timeout: int
    ) -> None:
        self._client = client
        self._intake = intake
        self._cursor = cursor
        self._timeout_ms = timeout * 1000
        self._task: asyncio.Task[None] | None = None
        self.problem = ""  # why the last /sync failed; empty once one succeeds
        self.synced = asyncio.Event()  # set once a response was taken (and stays set)
        self._since: str | None = None  # the last token this process moved past

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="matrix sync")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop_task(task)

    async def _run(self) -> None:
        failures = 0
        since: str | None = None
        loaded = False
        first = True  # this run's first sync: no waiting, and the full state of every room
        while True:
            try:
                if not loaded:
                    # A store that lost its data (a Redis without persistence restarted)
                    # has no token: this process's own last one is still right.
                    since, loaded = await self._cursor.load() or self._since, True
                    await share_keys(self._client)
                response = await self._client.sync(
                    timeout=0 if first else self._timeout_ms,
                    since=since,
                    full_state=first and since is not None,
                    sync_filter=_FILTER,
                )
                if not isinstance(response, SyncResponse):
                    raise _SyncFailed(f"{response.status_code} {response.message}")
                await share_keys(self._client)
                if since is None:
                    await self._intake.invites(response)  # history before the bot is skipped
                    taken = True
                else:
                    await self._fill_gaps(response, since)
                    taken = await self._intake.take(response)
                await share_keys(self._client)  # room keys for rooms joined in this batch
            except asyncio.CancelledError:
                raise
            except (_SyncFailed, StoreUnavailable, aiohttp.ClientError, TimeoutError) as exc:
                failures += 1
                delay = _BACKOFF.delay(failures)
                # Only the type of a network error: nio puts the access token in URLs.
                shown = exc if isinstance(exc, (_SyncFailed, StoreUnavailable)) else None
                self.problem = f"sync failed: {shown or type(exc).__name__}"
                log.warning("matrix sync failed error=%s retry_in=%.1fs", self.problem, delay)
                await asyncio.sleep(delay)
                continue
            except Exception as exc:  # a bug or a malformed event must not end the sync
                failures += 1
                self.problem = f"sync failed: {type(exc).__name__}"
                log.exception("matrix sync step failed")
                await asyncio.sleep(_BACKOFF.delay(failures))
                continue
            failures = 0
            self.problem = ""
            if not taken:
                self.problem = "events not stored (the store is unreachable); fetching them again"
                log.warning("matrix %s", self.problem)
                await asyncio.sleep(_NOT_STORED_PAUSE)
                continue
            since = self._since = response.next_batch
            try:
                await self._cursor.save(since)
            except StoreUnavailable as exc:  # kept in memory; what comes again is deduplicated
                log.warning("matrix sync token not saved error=%s", exc)
            first = False
            self.synced.set()

    async def _fill_gaps(self, response: SyncResponse, since: str) -> None:
        """A room whose timeline was cut (`limited`) gets its missing events from /messages,
        back from the response's start to the old token, so none is skipped."""
        for room_id, info in response.rooms.join.items():
            if not info.timeline.limited or not info.timeline.prev_batch:
                continue
            missing: list[object] = []
            start = info.timeline.prev_batch
            for _ in range(_GAP_PAGES):
                page = await self._client.room_messages(
                    room_id, start, end=since, limit=100, message_filter=None
                )
                chunk = getattr(page, "chunk", None)
                if not chunk:
                    break
                missing.extend(chunk)
                start = getattr(page, "end", None)
                if not start:
                    break
            else:
                log.warning("matrix gap not filled room=%s fetched=%d", room_id, len(missing))
            missing.reverse()  # /messages backwards: newest first
            info.timeline.events[:0] = missing


class _SyncFailed(Exception):
    """The homeserver answered /sync with an error."""
