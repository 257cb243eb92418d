"""Calls to Meta's Graph API for one business number: JSON and multipart requests with the
access token, retries after throttling and 5xx, and Graph errors as DeliveryError.

The token is only ever sent to the configured API host and to Meta's media host (a media
URL the API itself returned); it never appears in a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from gateway.sdk import SPREAD, Backoff, DeliveryError

log = logging.getLogger(__name__)

_TIMEOUT = aiohttp.ClientTimeout(total=60, sock_connect=10)
# Graph error codes that mean "slow down" (account, app, pair or spam throughput limits).
THROTTLED = frozenset({4, 80007, 130429, 131048, 131056})
# The customer-service window is closed: free-form messages need a template now.
OUTSIDE_WINDOW = 131047
_HINTS = {
    190: "the access token expired or was revoked; check CHATGATE_WHATSAPP__ACCESS_TOKEN",
    131030: "the recipient is not in the test number's allowed list",
    131026: "the message could not be delivered (the number is not on WhatsApp, or blocked)",
    OUTSIDE_WINDOW: "more than 24 hours since the customer wrote; configure whatsapp.templates",
    132001: "the template does not exist in this language; check whatsapp.templates",
    200: "the token lacks the whatsapp_business_messaging permission",
    10: "the token lacks the whatsapp_business_messaging permission",
}
# Codes no retry fixes (auth, permissions, recipients, bad parameters, templates).
_PERMANENT = frozenset({*_HINTS, 100, 131008, 131009, 131021, 131051, 131052, 131053})
# Meta's media host: download URLs from GET /{media-id} point here.
MEDIA_HOSTS = ("fbsbx.com", "whatsapp.net", "fbcdn.net")


class GraphError(DeliveryError):
    """A Graph API call answered with an error; `code` is Meta's numeric error code."""

    def __init__(self, message: str, *, code: int, permanent: bool) -> None:
        super().__init__(message, permanent=permanent)
        self.code = code


class GraphClient:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        api_url: str,
        api_version: str,
        token: str,
        retries: int,
        max_retry_after: float,
        on_throttled: Callable[[], None] = lambda: None,
    ) -> None:
        self._session = session
        self._root = f"{api_url.rstrip('/')}/{api_version}"
        self._api_host = urlsplit(api_url).hostname or ""
        self._token = token
        self._retries = retries
        self._max_wait = max_retry_after
        self._backoff = Backoff(1.0, cap=30.0, jitter=SPREAD)
        self._on_throttled = on_throttled

    @property
    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"}

    async def get(self, path: str) -> dict[str, Any]:
        return await self._call("GET", path)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", path, json=body)

    async def post_form(self, path: str, form: Callable[[], aiohttp.FormData]) -> dict[str, Any]:
        """A multipart POST; `form` builds the body anew for each attempt (one is consumed)."""
        return await self._call("POST", path, form=form)

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        form: Callable[[], aiohttp.FormData] | None = None,
    ) -> dict[str, Any]:
        url = f"{self._root}/{path.lstrip('/')}"
        attempt = 0
        while True:
            attempt += 1
            try:
                data = form() if form is not None else None
                async with self._session.request(
                    method, url, json=json, data=data, headers=self._auth, timeout=_TIMEOUT
                ) as response:
                    status = response.status
                    retry_after = _retry_after(response.headers.get("Retry-After"))
                    try:
                        payload: Any = await response.json(content_type=None)
                    except ValueError:
                        payload = None
            except (aiohttp.ClientError, TimeoutError) as exc:
                if attempt <= self._retries:
                    await self._backoff.wait(attempt)
                    continue
                log.warning(
                    "whatsapp call failed path=%s error=%s", _safe(path), type(exc).__name__
                )
                raise DeliveryError(f"WhatsApp {method} failed: {type(exc).__name__}") from None
            if status == 200 and isinstance(payload, dict) and "error" not in payload:
                return payload
            error = _error_of(payload)
            code = int(error.get("code") or 0) if isinstance(error.get("code"), int) else 0
            throttled = status == 429 or code in THROTTLED
            if throttled:
                self._on_throttled()
            retryable = throttled or status >= 500
            wait = retry_after
            if retryable and attempt <= self._retries and (wait is None or wait <= self._max_wait):
                log.info(
                    "whatsapp call retried path=%s code=%s status=%d", _safe(path), code, status
                )
                await self._backoff.wait(attempt, wait)
                continue
            raise self._failure(path, status, code, error)

    def _failure(self, path: str, status: int, code: int, error: dict[str, Any]) -> GraphError:
        permanent = code in _PERMANENT or (status in (400, 401, 403, 404) and code not in THROTTLED)
        hint = _HINTS.get(code)
        title = str(error.get("message") or f"HTTP {status}")[:200]
        log.log(
            logging.ERROR if permanent and code != OUTSIDE_WINDOW else logging.WARNING,
            "whatsapp call failed path=%s status=%d code=%d error=%r permanent=%s%s",
            _safe(path),
            status,
            code,
            title,
            permanent,
            f" hint={hint!r}" if hint else "",
        )
        return GraphError(
            f"WhatsApp refused the message ({code or status}: {title})",
            code=code,
            permanent=permanent,
        )

    async def download(self, url: str, max_bytes: int) -> aiohttp.ClientResponse:
        """GET a media URL the API returned, with the token; only Meta's hosts (or the
        configured API host) are sent the token. The caller reads and releases the response."""
        if not self.trusted_media_url(url):
            raise DeliveryError("WhatsApp gave a media address outside Meta's hosts")
        return await self._session.get(
            url,
            headers=self._auth,
            timeout=aiohttp.ClientTimeout(total=120, sock_connect=10),
            allow_redirects=False,
        )

    def trusted_media_url(self, url: str) -> bool:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if host == self._api_host:
            return parts.scheme in ("http", "https")
        meta = any(host == name or host.endswith("." + name) for name in MEDIA_HOSTS)
        return parts.scheme == "https" and meta


def _error_of(payload: Any) -> dict[str, Any]:
    error = payload.get("error") if isinstance(payload, dict) else None
    return error if isinstance(error, dict) else {}


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _safe(path: str) -> str:
    """The path for a log line (no query string, which could carry anything)."""
    return path.split("?", 1)[0]
