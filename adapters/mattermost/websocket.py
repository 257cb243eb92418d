"""Mattermost's WebSocket event stream (`/api/v4/websocket`), kept open and reopened.

The bot token goes in the upgrade request's Authorization header; the server answers with a
`hello` event, then sends events as JSON text frames. Events are handed to the adapter one
at a time, in the order they came, so posts of one channel reach intake in order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from gateway.sdk import parse_json, stop_task

log = logging.getLogger(__name__)

HEARTBEAT = 30.0  # seconds between WebSocket pings; a missed pong reconnects
MAX_BACKOFF = 30.0

OnEvent = Callable[[dict[str, Any]], Awaitable[None]]


def websocket_url(server_url: str) -> str:
    base = server_url.rstrip("/")
    if base.startswith("https://"):
        base = "wss://" + base.removeprefix("https://")
    elif base.startswith("http://"):
        base = "ws://" + base.removeprefix("http://")
    return base + "/api/v4/websocket"


class EventStream:
    def __init__(
        self,
        session: Callable[[], aiohttp.ClientSession],
        url: str,
        headers: dict[str, str],
        on_event: OnEvent,
        ready: asyncio.Event,
        resume_from: tuple[str, int] | None = None,
    ) -> None:
        self._session = session
        self._url = url
        self._headers = headers
        self._on_event = on_event
        self._task: asyncio.Task[None] | None = None
        self.ready = ready  # set while connected (after `hello`)
        # Reconnecting with both, the server sends the events missed meanwhile (if it still
        # has them; else the hello names a new connection).
        self._connection_id, self._next_seq = resume_from or ("", 0)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="mattermost websocket")

    async def stop(self) -> None:
        self.ready.clear()
        task, self._task = self._task, None
        await stop_task(task)

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                async with self._session().ws_connect(
                    self._url, headers=self._headers, heartbeat=HEARTBEAT, params=self._resume()
                ) as ws:
                    failures = 0
                    await self._read(ws)
                    log.warning("mattermost websocket closed code=%s; reconnecting", ws.close_code)
            except aiohttp.WSServerHandshakeError as exc:
                failures += 1
                if exc.status == 401:
                    log.error("mattermost refused the bot token on the websocket (HTTP 401)")
                else:
                    log.warning("mattermost websocket refused status=%s", exc.status)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                failures += 1
                log.warning("mattermost websocket failed error=%s", type(exc).__name__)
            finally:
                self.ready.clear()
            await asyncio.sleep(min(MAX_BACKOFF, 0.5 * 2 ** min(failures, 8)))

    @property
    def position(self) -> tuple[str, int] | None:
        """Where a later connection (in this process or the next leader) resumes from."""
        return (self._connection_id, self._next_seq) if self._connection_id else None

    def _resume(self) -> dict[str, str] | None:
        if not self._connection_id:
            return None
        return {"connection_id": self._connection_id, "sequence_number": str(self._next_seq)}

    def _hello(self, data: object) -> bool:
        """Note the connection the hello names; whether it is a new one (not resumed)."""
        found = data.get("connection_id") if isinstance(data, dict) else None
        connection_id = found if isinstance(found, str) else ""
        resumed = bool(self._connection_id) and connection_id == self._connection_id
        if resumed:
            log.info("mattermost websocket resumed; missed events follow")
        elif self._connection_id:
            log.warning(
                "mattermost websocket reconnected as a new connection; posts sent while it "
                "was down are not delivered again"
            )
        else:
            log.info("mattermost websocket connected")
        self._connection_id = connection_id
        return not resumed

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for frame in ws:
            if frame.type is not aiohttp.WSMsgType.TEXT:
                if frame.type in (aiohttp.WSMsgType.ERROR, aiohttp.WSMsgType.CLOSE):
                    return
                continue
            try:
                event = parse_json(frame.data)
            except ValueError:
                log.warning("mattermost websocket frame is not JSON; skipped")
                continue
            if not isinstance(event, dict):
                continue
            seq = event.get("seq")
            seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
            if event.get("event") == "hello":
                if self._hello(event.get("data")) and seq is not None:
                    self._next_seq = seq + 1  # a new connection counts from its hello
                self.ready.set()
                continue
            if seq is not None:
                self._next_seq = seq + 1
            if isinstance(event.get("event"), str):
                try:
                    await self._on_event(event)
                except Exception:
                    log.exception("mattermost event handler failed event=%s", event.get("event"))
