"""A fake Bot Framework on 127.0.0.1: the issuer that signs activities (OpenID metadata and
JWKS), Entra's token endpoint, the Bot Connector that takes replies at the serviceUrl, and
the file hosts Teams hands out (connector attachments, SharePoint links, OneDrive uploads).

Tokens are real RS256 JWTs made with PyJWT; the connector accepts only tokens the token
endpoint issued, as the real one does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import aiohttp
import jwt
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.server import LocalServer

APP_ID = "00000000-0000-0000-0000-00000000b07a"
APP_PASSWORD = "fake-bot-secret"
TENANT = "72f988bf-0000-0000-0000-000000000001"
ISSUER = "https://api.botframework.com"
BOT = {"id": "28:" + APP_ID, "name": "Chatgate"}
ALICE = {"id": "29:alice", "name": "Alice", "aadObjectId": "aad-alice"}
BOB = {"id": "29:bob", "name": "Bob", "aadObjectId": "aad-bob"}
PERSONAL = "a:personal-alice"
GROUP = "19:group-chat@thread.v2"
CHANNEL = "19:general@thread.tacv2"
KID = "fake-key-1"


@dataclass
class Call:
    method: str  # HTTP method
    conversation: str
    activity_id: str | None
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)


def _rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class FakeBotFramework(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.key = _rsa_key()
        self.calls: list[Call] = []
        self.tokens: set[str] = set()
        self.token_requests: list[dict[str, str]] = []
        self.files: dict[str, tuple[bytes, str]] = {}  # name -> (bytes, content type)
        self.downloads: list[tuple[str, str | None]] = []  # (path, Authorization)
        self.uploads: dict[str, bytes] = {}
        self.key_fetches = 0
        self.certificate: x509.Certificate | None = None  # the app's registered certificate
        # Answers for the next messages sent or updated: (status, headers), oldest first.
        self.failures: list[tuple[int, dict[str, str]]] = []
        self._ids = itertools.count(1)
        # Teams' streaming: open stream id -> last sequence number; False refuses streaming
        # as a bot without it is refused.
        self.streaming = True
        self.streams: dict[str, int] = {}
        self._changed = asyncio.Event()

    # -- addresses -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def service_url(self) -> str:
        return f"{self.url}/connector/"

    def settings(self, **extra: Any) -> dict[str, Any]:
        return {
            "app_id": APP_ID,
            "app_password": APP_PASSWORD,
            "openid_metadata_url": f"{self.url}/openid",
            "token_url": f"{self.url}/token",
            "allow_local_urls": True,  # the fake serves plain HTTP on 127.0.0.1
            **extra,
        }

    # -- tokens --------------------------------------------------------------------------

    def token(
        self,
        *,
        service_url: str | None = None,
        audience: str = APP_ID,
        issuer: str = ISSUER,
        key: rsa.RSAPrivateKey | None = None,
        expires_in: float = 3600,
    ) -> str:
        """A Bot Framework token as the channel sends it with an activity."""
        now = int(time.time())
        claims = {
            "iss": issuer,
            "aud": audience,
            "serviceurl": service_url or self.service_url,
            "nbf": now - 5,
            "exp": now + int(expires_in),
        }
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": KID})

    # -- routes --------------------------------------------------------------------------

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/openid", self._openid)
        app.router.add_get("/keys", self._keys)
        app.router.add_post("/token", self._token)
        base = "/connector/v3/conversations/{conversation}/activities"
        app.router.add_post(base, self._send)
        app.router.add_post(base + "/{activity}", self._send)
        app.router.add_put(base + "/{activity}", self._update)
        app.router.add_delete(base + "/{activity}", self._delete)
        app.router.add_get("/connector/attachments/{name}", self._connector_file)
        app.router.add_get("/sharepoint/{name}", self._sharepoint_file)
        app.router.add_put("/onedrive/{name}", self._upload)

    async def _openid(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "issuer": ISSUER,
                "jwks_uri": f"{self.url}/keys",
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            }
        )

    async def _keys(self, request: web.Request) -> web.Response:
        self.key_fetches += 1
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": KID, "use": "sig", "endorsements": ["msteams"]})
        return web.json_response({"keys": [jwk]})

    async def _token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.token_requests.append({k: str(v) for k, v in form.items()})
        if form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        if form.get("client_id") != APP_ID or not self._client_proven(form):
            return web.json_response({"error": "invalid_client"}, status=401)
        if form.get("scope") != "https://api.botframework.com/.default":
            return web.json_response({"error": "invalid_scope"}, status=400)
        token = f"bf-{uuid.uuid4().hex}"
        self.tokens.add(token)
        return web.json_response(
            {"token_type": "Bearer", "expires_in": 3600, "access_token": token}
        )

    def _client_proven(self, form: dict[str, Any]) -> bool:
        """The app's secret, or an assertion signed by its registered certificate (RFC 7523)
        for this token endpoint, naming the app, with the certificate's SHA-256 thumbprint."""
        if "client_assertion" not in form:
            return form.get("client_secret") == APP_PASSWORD
        if self.certificate is None:
            return False
        if form.get("client_assertion_type") != (
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        ):
            return False
        assertion = str(form["client_assertion"])
        digest = self.certificate.fingerprint(hashes.SHA256())
        thumbprint = base64.urlsafe_b64encode(digest).decode().rstrip("=")
        try:
            if jwt.get_unverified_header(assertion).get("x5t#S256") != thumbprint:
                return False
            claims = jwt.decode(
                assertion,
                self.certificate.public_key(),  # type: ignore[arg-type]
                algorithms=["PS256", "RS256"],
                audience=f"{self.url}/token",
                options={"require": ["exp", "iss", "sub", "jti"]},
            )
        except jwt.PyJWTError:
            return False
        return bool(claims["iss"] == claims["sub"] == APP_ID)

    def _authorized(self, request: web.Request) -> bool:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        return scheme == "Bearer" and token in self.tokens

    async def _body(self, request: web.Request) -> dict[str, Any] | web.Response:
        if not self._authorized(request):
            return web.json_response({"error": {"code": "Unauthorized"}}, status=401)
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"code": "BadArgument"}}, status=400)
        if not isinstance(body, dict) or not body.get("type"):
            return web.json_response({"error": {"code": "BadArgument"}}, status=400)
        if self.failures and body["type"] == "message":
            status, headers = self.failures.pop(0)
            self._record(Call("FAILED", request.match_info["conversation"], None, body))
            return web.json_response(
                {"error": {"code": "Throttled" if status == 429 else "ServiceError"}},
                status=status,
                headers=headers,
            )
        return body

    async def _send(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        conversation = request.match_info["conversation"]
        info = _stream_info(body)
        if info is not None:
            refused = self._stream(body, info)
            if refused is not None:
                return refused
        self._record(Call("POST", conversation, request.match_info.get("activity"), body))
        if info is not None and info.get("streamId"):
            return web.json_response({"id": info["streamId"]})
        if body["type"] == "typing" and info is None:
            return web.json_response({})
        new_id = f"bot-{next(self._ids)}"
        if info is not None:
            self.streams[new_id] = int(info.get("streamSequence") or 0)
        return web.json_response({"id": new_id})

    def _stream(self, body: dict[str, Any], info: dict[str, Any]) -> web.Response | None:
        """Teams' streaming rules: chunks are typing activities with a growing sequence
        number, the first without a stream id; the final message names the open stream."""
        if not self.streaming:
            return _error(400, "BadArgument", "Streaming API is not enabled for this bot")
        stream_id, kind = info.get("streamId"), info.get("streamType")
        if kind == "final":
            if body["type"] != "message" or stream_id not in self.streams:
                return _error(400, "BadArgument", "final message of an unknown stream")
            del self.streams[stream_id]
            return None
        if body["type"] != "typing" or kind not in ("informative", "streaming"):
            return _error(400, "BadArgument", "stream chunks are typing activities")
        sequence = info.get("streamSequence")
        if not isinstance(sequence, int) or sequence < 1:
            return _error(400, "BadArgument", "streamSequence is required")
        if stream_id is None:
            return None
        if stream_id not in self.streams or sequence <= self.streams[stream_id]:
            return _error(400, "BadArgument", "streamSequence must grow within a stream")
        self.streams[stream_id] = sequence
        return None

    async def _update(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        activity = request.match_info["activity"]
        self._record(Call("PUT", request.match_info["conversation"], activity, body))
        return web.json_response({"id": activity})

    async def _delete(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.json_response({"error": {"code": "Unauthorized"}}, status=401)
        activity = request.match_info["activity"]
        self._record(Call("DELETE", request.match_info["conversation"], activity, {}))
        return web.Response(status=200)

    async def _connector_file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.downloads.append((request.path, request.headers.get("Authorization")))
        if not self._authorized(request):
            return web.Response(status=401)
        data, mime = self.files[name]
        return web.Response(body=data, content_type=mime)

    async def _sharepoint_file(self, request: web.Request) -> web.Response:
        # A pre-authenticated link: the token in the query string, no bearer token.
        name = request.match_info["name"]
        self.downloads.append((request.path, request.headers.get("Authorization")))
        if request.query.get("tempauth") != "ok" or name not in self.files:
            return web.Response(status=403)
        data, mime = self.files[name]
        return web.Response(body=data, content_type=mime)

    async def _upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        expected = f"bytes 0-{len(data) - 1}/{len(data)}"
        if request.headers.get("Content-Range") != expected:
            return web.Response(status=400)
        self.uploads[request.match_info["name"]] = data
        return web.json_response({"id": "drive-item-1", "name": request.match_info["name"]})

    def _record(self, call: Call) -> None:
        self.calls.append(call)
        self._changed.set()

    # -- inspection ----------------------------------------------------------------------

    def sent(self, kind: str = "message") -> list[Call]:
        return [c for c in self.calls if c.method == "POST" and c.body.get("type") == kind]

    def stream_chunks(self) -> list[Call]:
        return [c for c in self.sent("typing") if _stream_info(c.body) is not None]

    def updates(self) -> list[Call]:
        return [c for c in self.calls if c.method == "PUT"]

    async def wait_until(
        self, condition: Callable[[], Any], *, seconds: float = 15.0, what: str = ""
    ) -> Any:
        deadline = time.monotonic() + seconds
        while True:
            found = condition()
            if found:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"not within {seconds} s: {what}; calls={self.calls}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.2))

    async def wait_for_text(self, text: str, **kwargs: Any) -> Call:
        def found() -> Call | None:
            for call in self.calls:
                if call.method in ("POST", "PUT") and call.body.get("text") == text:
                    return call
            return None

        result: Call = await self.wait_until(found, what=f"a message {text!r}", **kwargs)
        return result

    # -- activities the channel sends ----------------------------------------------------

    def activity(
        self,
        conversation: str,
        *,
        text: str = "",
        sender: dict[str, str] | None = None,
        kind: str = "personal",
        activity_id: str | None = None,
        mention: bool = False,
        **extra: Any,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": "message",
            "id": activity_id or f"user-{uuid.uuid4().hex[:8]}",
            "timestamp": "2026-11-29T00:00:00.000Z",
            "serviceUrl": self.service_url,
            "channelId": "msteams",
            "from": sender or ALICE,
            "conversation": {"id": conversation, "conversationType": kind, "tenantId": TENANT},
            "recipient": BOT,
            "text": (f"<at>{BOT['name']}</at> " if mention else "") + text,
            "textFormat": "plain",
            "channelData": {"tenant": {"id": TENANT}},
        }
        if mention:
            body["entities"] = [
                {"type": "mention", "mentioned": BOT, "text": f"<at>{BOT['name']}</at>"}
            ]
        if kind == "channel":
            body["channelData"].update(
                {"team": {"id": "19:team@thread.tacv2"}, "channel": {"id": conversation}}
            )
        body.update(extra)
        return body

    def submit(
        self,
        conversation: str,
        card_id: str,
        data: dict[str, Any],
        *,
        sender: dict[str, str],
        kind: str = "personal",
    ) -> dict[str, Any]:
        """An Adaptive Card Action.Submit, as Teams posts it back."""
        return self.activity(
            conversation, sender=sender, kind=kind, replyToId=card_id, value=data, text=""
        )

    async def deliver(
        self,
        endpoint: str,
        activity: dict[str, Any] | bytes,
        token: str | None = None,
        *,
        unauthenticated: bool = False,
        content_type: str = "application/json",
    ) -> int:
        """POST an activity to the bot as the channel does; returns the HTTP status."""
        if token is None and not unauthenticated:
            token = self.token()
        headers = {"Content-Type": content_type}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = activity if isinstance(activity, bytes) else json.dumps(activity).encode()
        async with (
            aiohttp.ClientSession() as session,
            session.post(endpoint, data=data, headers=headers) as response,
        ):
            await response.read()
            return response.status

    async def __aenter__(self) -> Self:
        return await self.start()


def _stream_info(body: dict[str, Any]) -> dict[str, Any] | None:
    for entity in body.get("entities") or []:
        if isinstance(entity, dict) and entity.get("type") == "streaminfo":
            return entity
    return None


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)
