"""Files on Slack: downloads (files.info, then the file's private URL with the bot token) and
uploads (files_upload_v2 into the conversation's thread, the text as its comment).

The bot token is only ever sent to Slack's own file host (or the configured API host, which
tests point at a fake), never to a URL from a message. Scopes: files:read, files:write.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.sending import SlackSender, render_parts
from gateway.sdk import AttachmentUnavailable, DeliveryError, Outbound, SentRef
from gateway.sdk.media import read_limited, too_large

MAX_UPLOAD_BYTES = 1_000_000_000  # Slack's limit per file
_DOWNLOAD = aiohttp.ClientTimeout(total=120, sock_connect=10)
_SLACK_FILE_HOSTS = ("slack.com", "slack-edge.com", "slack-files.com")


class SlackFiles:
    def __init__(
        self,
        client: AsyncWebClient,
        session: aiohttp.ClientSession,
        sender: SlackSender,
        *,
        token: str,
        api_url: str,
    ) -> None:
        self._client = client
        self._session = session
        self._sender = sender
        self._token = token
        self._api_host = urlsplit(api_url).hostname or ""

    async def download(self, file_id: str, max_bytes: int) -> bytes:
        file = await self._info(file_id)
        size = file.get("size")
        if isinstance(size, int) and size > max_bytes:
            raise too_large(size, max_bytes)
        url = file.get("url_private_download") or file.get("url_private")
        if not isinstance(url, str) or not self._slack_host(url):
            raise AttachmentUnavailable("Slack gave no download address for the file")
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            async with self._session.get(
                url, headers=headers, timeout=_DOWNLOAD, allow_redirects=False
            ) as response:
                if response.status != 200:
                    raise AttachmentUnavailable(f"Slack answered HTTP {response.status}")
                # Without files:read Slack answers with its sign-in page instead of the file.
                if response.content_type == "text/html" and file.get("mimetype") != "text/html":
                    raise AttachmentUnavailable(
                        "Slack sent a web page instead of the file; the app needs the "
                        "files:read scope"
                    )
                return await read_limited(response, max_bytes)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise AttachmentUnavailable(
                f"the file could not be fetched ({type(exc).__name__})"
            ) from None

    async def upload(self, out: Outbound) -> SentRef:
        """Every file of `out` in one share, in its thread, with the text as the comment."""
        comment = render_parts(out.text, out.markdown, split=False)[0] if out.text.strip() else None
        uploads = [
            {"file": file.data, "filename": file.name, "title": file.name}
            for file in out.attachments
        ]
        try:
            response = await self._sender.call(
                "files.upload",
                self._client.files_upload_v2(
                    file_uploads=uploads,
                    channel=out.chat.chat_id,
                    thread_ts=out.chat.thread_id,
                    initial_comment=comment,
                ),
                channel=out.chat.chat_id,
            )
        except SlackRequestError as exc:  # the upload step itself (not an API error)
            raise DeliveryError(f"Slack file upload failed: {exc}") from None
        files = response.get("files") or []
        first: dict[str, Any] = files[0] if files and isinstance(files[0], dict) else {}
        # A share has no message ts yet; the file id names what was sent.
        return SentRef(chat=out.chat, message_id=str(first.get("id", "")))

    async def _info(self, file_id: str) -> dict[str, Any]:
        try:
            response = await self._client.files_info(file=file_id)
        except SlackApiError as exc:
            code = exc.response.get("error") or f"http_{exc.response.status_code}"
            hint = " (the app needs the files:read scope)" if code == "missing_scope" else ""
            raise AttachmentUnavailable(f"Slack refused the file: {code}{hint}") from None
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise AttachmentUnavailable(
                f"Slack could not be reached ({type(exc).__name__})"
            ) from None
        file = response.get("file")
        if not isinstance(file, dict):
            raise AttachmentUnavailable("Slack sent no file information")
        return file

    def _slack_host(self, url: str) -> bool:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if host == self._api_host:
            return parts.scheme in ("http", "https")
        slack = any(host == name or host.endswith("." + name) for name in _SLACK_FILE_HOSTS)
        return parts.scheme == "https" and slack
