"""Mattermost's REST API v4 over one pooled aiohttp session, with the bot token.

Only the calls the adapter makes, each returning the JSON Mattermost sends. A 429 is waited
out (Retry-After, else X-RateLimit-Reset) and a 5xx or a dropped connection retried a few
times; what still fails raises `MattermostError` with the status and Mattermost's error id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

log = logging.getLogger(__name__)

RETRIES = 3
MAX_WAIT = 30.0  # a longer rate-limit wait fails the call instead


class MattermostError(Exception):
    """Mattermost refused a call, or could not be reached (status 0)."""

    def __init__(self, status: int, error_id: str, message: str) -> None:
        super().__init__(f"HTTP {status} {error_id}: {message}" if status else message)
        self.status = status
        self.error_id = error_id


class MattermostAPI:
    def __init__(
        self, base_url: str, token: str, *, on_rate_limited: Callable[[], None] = lambda: None
    ) -> None:
        self.base = base_url.rstrip("/") + "/api/v4"
        self._headers = {"Authorization": f"Bearer {token}"}
        self._session: aiohttp.ClientSession | None = None
        self._on_rate_limited = on_rate_limited

    @property
    def auth_headers(self) -> dict[str, str]:
        return dict(self._headers)

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- the calls ---------------------------------------------------------------------------

    async def me(self) -> dict[str, Any]:
        return await self.object("GET", "/users/me")

    async def team_by_name(self, name: str) -> dict[str, Any]:
        return await self.object("GET", f"/teams/name/{name}")

    async def channel(self, channel_id: str) -> dict[str, Any]:
        return await self.object("GET", f"/channels/{channel_id}")

    async def create_post(self, post: dict[str, Any]) -> dict[str, Any]:
        return await self.object("POST", "/posts", json=post)

    async def patch_post(self, post_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self.object("PUT", f"/posts/{post_id}/patch", json=patch)

    async def delete_post(self, post_id: str) -> None:
        await self.call("DELETE", f"/posts/{post_id}")

    async def typing(self, user_id: str, channel_id: str, parent_id: str = "") -> None:
        body = {"channel_id": channel_id, "parent_id": parent_id}
        await self.call("POST", f"/users/{user_id}/typing", json=body)

    async def direct_channel(self, bot_id: str, user_id: str) -> dict[str, Any]:
        return await self.object("POST", "/channels/direct", json=[bot_id, user_id])

    async def upload(
        self, channel_id: str, files: list[tuple[str, str, bytes]]
    ) -> list[dict[str, Any]]:
        """Upload (name, mime type, bytes) files to a channel; their FileInfos."""

        def form() -> aiohttp.FormData:
            data = aiohttp.FormData()
            data.add_field("channel_id", channel_id)
            for name, mime, content in files:
                data.add_field("files", content, filename=name, content_type=mime)
            return data

        answer = await self.object("POST", "/files", form=form)
        infos = answer.get("file_infos")
        if not isinstance(infos, list):
            raise MattermostError(0, "", "the upload answer has no file_infos")
        return infos

    # -- the transport -----------------------------------------------------------------------

    async def object(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        """A call whose answer must be a JSON object (a post, a user, a channel)."""
        answer = await self.call(method, path, **options)
        if not isinstance(answer, dict):
            raise MattermostError(0, "", f"{method} {path} answered with something not an object")
        return answer

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        form: Callable[[], aiohttp.FormData] | None = None,
    ) -> Any:
        """One API call, retried on 429, 5xx and connection errors; the decoded JSON."""
        url = self.base + path
        for attempt in range(RETRIES + 1):
            last = attempt == RETRIES
            try:
                async with self.session().request(
                    method,
                    url,
                    headers=self._headers,
                    json=json,
                    data=form() if form is not None else None,
                ) as response:
                    if response.status == 429 and not last:
                        wait = _retry_after(response.headers)
                        self._on_rate_limited()
                        if wait <= MAX_WAIT:
                            log.info("mattermost rate limited path=%s wait=%.1f", path, wait)
                            await asyncio.sleep(wait)
                            continue
                    if response.status >= 500 and not last:
                        await asyncio.sleep(0.2 * 2**attempt)
                        continue
                    if response.status >= 400:
                        raise await _error(response)
                    if response.status == 204 or response.content_length == 0:
                        return {}
                    return await response.json(content_type=None)
            except (aiohttp.ClientError, TimeoutError) as exc:
                if last:
                    raise MattermostError(0, "", f"{type(exc).__name__}: {exc}") from None
                await asyncio.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")

    async def read_file(self, file_id: str, max_bytes: int) -> bytes:
        """A file's bytes, refused past `max_bytes` (checked before and while reading)."""
        url = f"{self.base}/files/{file_id}"
        async with self.session().get(url, headers=self._headers) as response:
            if response.status >= 400:
                raise await _error(response)
            if (response.content_length or 0) > max_bytes:
                raise FileTooLarge(response.content_length or 0)
            chunks, size = [], 0
            async for chunk in response.content.iter_chunked(64 * 1024):
                size += len(chunk)
                if size > max_bytes:
                    raise FileTooLarge(size)
                chunks.append(chunk)
            return b"".join(chunks)


class FileTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"the file is larger than allowed ({size} bytes read)")


def _retry_after(headers: Any) -> float:
    for name in ("Retry-After", "X-RateLimit-Reset"):
        value = headers.get(name)
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            continue
    return 1.0


async def _error(response: aiohttp.ClientResponse) -> MattermostError:
    error_id, message = "", response.reason or ""
    try:
        body = await response.json(content_type=None)
    except (ValueError, aiohttp.ClientError):
        body = None
    if isinstance(body, dict):
        error_id = str(body.get("id", ""))
        message = str(body.get("message", message))
    return MattermostError(response.status, error_id, message)
