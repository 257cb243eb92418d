"""Mattermost posts written down on receipt: the WebSocket delivers a post once, so a replica
that dies after receiving it but before storing it would lose it.

`note` records the post (as the Inbound it became) before the adapter does anything else with
it; `done` removes it once intake has answered. The replica that takes the socket over submits
whatever a dead one left noted; intake's dedupe on the event id makes that safe when the dead
one got as far as storing it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.sdk import Inbound, Store, StoreUnavailable, keys

log = logging.getLogger(__name__)


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
