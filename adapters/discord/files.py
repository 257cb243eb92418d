"""Attachment downloads from Discord's CDN, where a message's attachment URL points.

The handle is that URL, so it is checked to be Discord's CDN (or the configured API host,
which tests point at a fake) before anything is fetched: a URL from anywhere else is never
followed. Signed CDN links expire after about a day; an expired one is renewed once through
`POST /attachments/refresh-urls` with the bot token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import discord
from discord.http import Route

from gateway.sdk import AttachmentUnavailable
from gateway.sdk.media import read_limited

_CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
_DOWNLOAD = aiohttp.ClientTimeout(total=120, sock_connect=10)
_EXPIRED = frozenset({403, 404, 410})


class DiscordFiles:
    def __init__(self, client: Callable[[], discord.Client], api_url: str) -> None:
        self._client = client
        self._api_host = urlsplit(api_url).hostname or ""
        self._session: aiohttp.ClientSession | None = None

    async def download(self, url: str, max_bytes: int) -> bytes:
        if not self._is_discord(url):
            raise AttachmentUnavailable("that is not a Discord attachment link")
        status, data = await self._get(url, max_bytes)
        if status in _EXPIRED:
            fresh = await self._refresh(url)
            if fresh is not None and self._is_discord(fresh):
                status, data = await self._get(fresh, max_bytes)
        if status != 200:
            raise AttachmentUnavailable(
                f"Discord no longer serves the file (HTTP {status}); ask for it again"
            )
        return data

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _get(self, url: str, max_bytes: int) -> tuple[int, bytes]:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.get(url, timeout=_DOWNLOAD, allow_redirects=False) as got:
                if got.status != 200:
                    return got.status, b""
                return 200, await read_limited(got, max_bytes)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise AttachmentUnavailable(
                f"the file could not be fetched ({type(exc).__name__})"
            ) from None

    async def _refresh(self, url: str) -> str | None:
        try:
            answer: Any = await self._client().http.request(
                Route("POST", "/attachments/refresh-urls"), json={"attachment_urls": [url]}
            )
        except (discord.HTTPException, aiohttp.ClientError, OSError):
            return None
        for item in (answer or {}).get("refreshed_urls") or ():
            if isinstance(item, dict) and isinstance(item.get("refreshed"), str):
                return str(item["refreshed"])
        return None

    def _is_discord(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.hostname == self._api_host and parts.hostname:
            return parts.scheme in ("http", "https")
        return parts.scheme == "https" and parts.hostname in _CDN_HOSTS
