"""Messages written down on receipt, for platforms that deliver an event once (Discord's
gateway, Mattermost's WebSocket): a replica that dies after receiving one but before storing
it would lose it.

`note` records the message (as the Inbound it became) in a hash of the store before the
adapter does anything else with it; `done` removes it once intake has answered. A replica
that takes the connection over submits whatever a dead one left noted (`replay`); intake's
dedupe on the event id makes that safe when the dead one got as far as storing it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.sdk.messages import Inbound
from gateway.store.base import Store, StoreUnavailable

log = logging.getLogger(__name__)


class ReceivedJournal:
    """The receipts of one platform, under the store hash `key`; `what` names a message in
    the log ("discord message", "mattermost post")."""

    def __init__(
        self,
        store: Store,
        submit: Callable[[Inbound], Awaitable[Any]],
        *,
        key: str,
        what: str,
    ) -> None:
        self._store = store
        self._submit = submit
        self._key = key
        self._what = what

    async def note(self, inbound: Inbound) -> None:
        entry = json.dumps({"at": time.time(), "inbound": inbound.model_dump(mode="json")})
        await self._store.hset(self._key, inbound.event_id, entry)

    async def done(self, inbound: Inbound) -> None:
        try:
            await self._store.hdel(self._key, inbound.event_id)
        except StoreUnavailable as exc:  # submitted already: a replay is dropped as a repeat
            log.warning(
                "%s receipt not cleared event=%s error=%s", self._what, inbound.event_id, exc
            )

    async def replay(self) -> int:
        """Submit every message a replica noted and never finished (it died), oldest first;
        how many were submitted."""
        entries = []
        for event_id, raw in (await self._store.hgetall(self._key)).items():
            try:
                data = json.loads(raw)
                entries.append((float(data["at"]), Inbound.model_validate(data["inbound"])))
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable %s receipt dropped event=%s", self._what, event_id)
                await self._store.hdel(self._key, event_id)
        for _, inbound in sorted(entries, key=lambda pair: pair[0]):
            log.warning(
                "%s received by a replica that stopped; submitting it event=%s",
                self._what,
                inbound.event_id,
            )
            await self._submit(inbound)
            await self.done(inbound)
        return len(entries)
