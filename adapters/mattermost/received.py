"""Where the Mattermost WebSocket was, so the next connection (the next leader's too) asks
the server for what it missed. The posts themselves are written down on receipt by the
core's `ReceivedJournal`, as Discord's messages are."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from gateway.sdk import Store, StoreUnavailable, keys

if TYPE_CHECKING:
    from adapters.mattermost.websocket import EventStream

log = logging.getLogger(__name__)

SAVE_EVERY = 1.0  # seconds between two saves of a moving socket position
POSITION_TTL = 3600.0  # the server keeps missed events far shorter than this


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
