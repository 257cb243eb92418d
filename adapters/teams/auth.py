"""Who may post activities: a Bot Framework JWT checked before the body is read.

The token must be signed (RS256) by a key the issuer's OpenID metadata lists, name the
Bot Framework as issuer and this bot's app id as audience, and be current (five minutes
of clock skew, as the Bot Framework allows). A key that carries endorsements must endorse
the activity's channel, and the token's serviceUrl claim must equal the activity's
serviceUrl; both are checked once the body is parsed (`check_activity`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jwt

log = logging.getLogger(__name__)

_LEEWAY = 300.0  # seconds of clock skew the Bot Framework allows
_KEYS_MAX_AGE = 24 * 3600.0  # the issuer rotates keys; refetch at least daily
_REFETCH_AFTER = 60.0  # an unknown key id refetches at most this often (no amplification)


class Unauthorized(Exception):
    """The request does not carry a valid Bot Framework token (answered 401)."""


class Forbidden(Exception):
    """A valid token that does not cover this activity (answered 403)."""


class KeysUnavailable(Exception):
    """The issuer's metadata or keys cannot be fetched now (answered 503: sent again)."""


@dataclass(frozen=True)
class Claims:
    """A verified token: its claims and the endorsements of the key that signed it."""

    values: dict[str, Any]
    endorsements: tuple[str, ...] = ()

    @property
    def service_url(self) -> str | None:
        for name, value in self.values.items():
            if name.lower() == "serviceurl" and isinstance(value, str):
                return value
        return None


@dataclass
class _KeySet:
    keys: dict[str, tuple[jwt.PyJWK, tuple[str, ...]]] = field(default_factory=dict)
    fetched_at: float = 0.0


class ActivityAuth:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        metadata_url: str,
        issuer: str,
        app_id: str,
    ) -> None:
        self._session = session
        self._metadata_url = metadata_url
        self._issuer = issuer
        self._app_id = app_id
        self._keys = _KeySet()
        self._lock = asyncio.Lock()

    async def verify(self, authorization: str | None) -> Claims:
        """The claims of the bearer token in `authorization`; Unauthorized when it is not one."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("no bearer token")
        token = token.strip()
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthorized("not a JWT") from None
        kid = header.get("kid")
        if header.get("alg") != "RS256" or not isinstance(kid, str):
            raise Unauthorized("not an RS256 token with a key id")
        key, endorsements = await self._key(kid)
        try:
            values = jwt.decode(
                token,
                key=key,
                algorithms=["RS256"],
                audience=self._app_id,
                issuer=self._issuer,
                leeway=_LEEWAY,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise Unauthorized(type(exc).__name__) from None
        return Claims(values=values, endorsements=endorsements)

    async def _key(self, kid: str) -> tuple[jwt.PyJWK, tuple[str, ...]]:
        async with self._lock:
            now = time.monotonic()
            stale = now - self._keys.fetched_at > _KEYS_MAX_AGE
            unknown = kid not in self._keys.keys
            if stale or (unknown and now - self._keys.fetched_at > _REFETCH_AFTER):
                self._keys = await self._fetch()
            found = self._keys.keys.get(kid)
        if found is None:
            raise Unauthorized("signed by a key the issuer does not list")
        return found

    async def _fetch(self) -> _KeySet:
        try:
            metadata = await self._get_json(self._metadata_url)
            jwks_uri = metadata.get("jwks_uri") if isinstance(metadata, dict) else None
            if not isinstance(jwks_uri, str):
                raise KeysUnavailable("the OpenID metadata names no jwks_uri")
            listed = await self._get_json(jwks_uri)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise KeysUnavailable(f"cannot fetch the signing keys ({type(exc).__name__})") from None
        keys: dict[str, tuple[jwt.PyJWK, tuple[str, ...]]] = {}
        entries = listed.get("keys") if isinstance(listed, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
                continue
            try:
                key = jwt.PyJWK(entry, algorithm="RS256")
            except jwt.PyJWTError:
                continue  # a key type this check does not use
            endorsements = entry.get("endorsements") or []
            keys[entry["kid"]] = (key, tuple(str(e) for e in endorsements))
        log.info("teams signing keys fetched count=%d", len(keys))
        return _KeySet(keys=keys, fetched_at=time.monotonic())

    async def _get_json(self, url: str) -> Any:
        timeout = aiohttp.ClientTimeout(total=10)
        async with self._session.get(url, timeout=timeout) as response:
            if response.status != 200:
                raise ValueError(f"HTTP {response.status}")
            return await response.json(content_type=None)


def check_activity(claims: Claims, *, service_url: str, channel_id: str) -> None:
    """The Bot Framework's rules that tie a token to the activity it came with."""
    if claims.endorsements and channel_id not in claims.endorsements:
        raise Forbidden("the signing key does not endorse this channel")
    claimed = claims.service_url
    if claimed is None or claimed.rstrip("/") != service_url.rstrip("/"):
        raise Forbidden("the token's serviceUrl is not the activity's")
