"""Mattermost posts written down on receipt: the WebSocket delivers a post once, so a replica
that dies after receiving it but before storing it would lose it. And where the socket was,
so the next connection (the next leader's too) asks the server for what it missed.

`note` records the post (as the Inbound it became) before the adapter does anything else with
it; `done` removes it once intake has answered. The replica that takes the socket over submits
whatever a dead one left noted; intake's dedupe on the event id makes that safe when the dead
one got as far as storing it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway.sdk import Inbound, Store, StoreUnavailable, keys

if TYPE_CHECKING:
    from adapters.mattermost.websocket import EventStream

log = logging.getLogger(__name__)

SAVE_EVERY = 1.0  # seconds between two saves of a moving socket position
POSITION_TTL = 3600.0  # the server keeps missed events far shorter than this


class ReceivedJournal:
    def __init__(self, store: Store, submit: Callable[[Inbound], Awaitable[Any]]) -> None:
        self._store = store
        self._submit = submit

    async def note(self, inbound: Inbound) -> None:
        entry = json.dumps({"at": time.time(), "inbound": inbound.model_dump(mode="json")})
        await self._store.hset(keys.MATTERMOST_RECEIVED, inbound.event_id, entry)

    async def done(self, inbound: Inbound) -> None:
        try:
            await self._store.hdel(keys.MATTERMOST_RECEIVED, inbound.event_id)
        except StoreUnavailable as exc:  # submitted already: a replay is dropped as a repeat
            log.warning("mattermost receipt not cleared event=%s error=%s", inbound.event_id, exc)

    async def replay(self) -> int:
        """Submit every post a replica noted and never finished, oldest first; how many."""
        entries = []
        for event_id, raw in (await self._store.hgetall(keys.MATTERMOST_RECEIVED)).items():
            try:
                data = json.loads(raw)
                entries.append((float(data["at"]), Inbound.model_validate(data["inbound"])))
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable mattermost receipt dropped event=%s", event_id)
                await self._store.hdel(keys.MATTERMOST_RECEIVED, event_id)
        for _, inbound in sorted(entries, key=lambda pair: pair[0]):
            log.warning(
                "mattermost post received by a replica that stopped; submitting it event=%s",
                inbound.event_id,
            )
            await self._submit(inbound)
            await self.done(inbound)
        return len(entries)


class SocketPosition:
    """The socket's connection id and next sequence number, kept in the store while it runs
    and when it closes. A replica that takes the socket over resumes from there: the server
    sends what it still holds of the events in between, and intake drops the ones that
    were stored already (the same event ids)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def load(self) -> tuple[str, int] | None:
        try:
            found = await self._store.get_json(keys.MATTERMOST_SOCKET)
        except StoreUnavailable as exc:
            log.warning("mattermost socket position not read error=%s", exc)
            return None
        if not isinstance(found, dict):
            return None
        connection_id, next_seq = found.get("connection_id"), found.get("next_seq")
        if isinstance(connection_id, str) and connection_id and isinstance(next_seq, int):
            return connection_id, next_seq
        return None

    async def save(self, stream: EventStream) -> None:
        position = stream.position
        if position is None:
            return
        value = {"connection_id": position[0], "next_seq": position[1]}
        try:
            await self._store.set_json(keys.MATTERMOST_SOCKET, value, ttl=POSITION_TTL)
        except StoreUnavailable as exc:
            log.warning("mattermost socket position not saved error=%s", exc)

    async def keep(self, stream: EventStream) -> None:
        """Save the position whenever it moved, until the task is cancelled."""
        saved = None
        while True:
            await asyncio.sleep(SAVE_EVERY)
            if stream.position != saved:
                saved = stream.position
                await self.save(stream)
