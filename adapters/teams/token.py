"""The token the bot replies with: Entra's client-credentials grant for the Bot Framework.

A client secret, or a certificate (a signed client assertion, RFC 7523). The token is
cached until five minutes before it expires; one request at a time refreshes it.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from pathlib import Path

import aiohttp
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from gateway.sdk import DeliveryError

_EARLY = 300.0  # refresh this long before the token expires


class TokenUnavailable(DeliveryError):
    """Entra refused the credentials or could not be reached."""


class Certificate:
    """An application certificate (PEM: certificate and private key) that signs assertions."""

    def __init__(self, path: Path) -> None:
        pem = path.read_bytes()
        self._key = serialization.load_pem_private_key(pem, password=None)
        cert = x509.load_pem_x509_certificate(pem)
        digest = cert.fingerprint(hashes.SHA256())
        self.thumbprint = base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def assertion(self, client_id: str, audience: str) -> str:
        now = int(time.time())
        claims = {
            "aud": audience,
            "iss": client_id,
            "sub": client_id,
            "jti": uuid.uuid4().hex,
            "nbf": now,
            "iat": now,
            "exp": now + 600,
        }
        headers = {"x5t#S256": self.thumbprint}
        return jwt.encode(claims, self._key, algorithm="PS256", headers=headers)  # type: ignore[arg-type]


class BotToken:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        token_url: str,
        client_id: str,
        scope: str,
        secret: str | None,
        certificate: Certificate | None,
    ) -> None:
        self._session = session
        self._token_url = token_url
        self._client_id = client_id
        self._scope = scope
        self._secret = secret
        self._certificate = certificate
        self._token = ""
        self._expires = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> str:
        async with self._lock:
            if not self._token or time.monotonic() > self._expires - _EARLY:
                await self._refresh()
            return self._token

    def forget(self) -> None:
        """Drop the cached token (the connector answered 401 with it)."""
        self._token = ""

    async def _refresh(self) -> None:
        form = {
            "grant_type": "client_credentials",
            "client_id": self._client_id,
            "scope": self._scope,
        }
        if self._certificate is not None:
            form["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            form["client_assertion"] = self._certificate.assertion(self._client_id, self._token_url)
        else:
            form["client_secret"] = self._secret or ""
        try:
            timeout = aiohttp.ClientTimeout(total=15)
            async with self._session.post(self._token_url, data=form, timeout=timeout) as resp:
                body = await resp.json(content_type=None)
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise TokenUnavailable(
                f"cannot get a Bot Framework token ({type(exc).__name__})"
            ) from None
        if status != 200 or not isinstance(body, dict) or "access_token" not in body:
            code = body.get("error") if isinstance(body, dict) else None
            raise TokenUnavailable(
                f"Entra refused the bot's credentials ({code or f'HTTP {status}'}); "
                "check teams.app_id and teams.app_password",
                permanent=True,
            )
        self._token = str(body["access_token"])
        self._expires = time.monotonic() + float(body.get("expires_in", 3600))
