"""Fake OpenAI-compatible media endpoints: /audio/transcriptions, /audio/speech and
/images/generations, mounted on the scripted LLM server (so `stt.base_url` may default to
`llm.base_url`) or served alone.

    llm.media.transcripts.append("turn the lights off")
    llm.media.fail("/audio/transcriptions", 500, "model crashed")
"""

from __future__ import annotations

import base64
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.server import LocalServer
from tests.media_samples import ogg_opus, png


@dataclass
class MediaCall:
    path: str
    fields: dict[str, str]  # form fields (transcriptions) or the JSON body's strings
    body: dict[str, Any] = field(default_factory=dict)
    file_name: str = ""
    file_type: str = ""
    file_data: bytes = b""
    authorization: str = ""


@dataclass
class _Failure:
    status: int
    message: str


class MediaEndpoints:
    def __init__(self) -> None:
        self.calls: list[MediaCall] = []
        self.transcripts: deque[str] = deque()
        self.default_transcript = "hello from a voice note"
        self.speech: bytes = ogg_opus(b"spoken words" * 20)
        self.image: bytes = png(64, 48)
        self.image_as_url = False  # answer {"url": ...} instead of base64
        self._failures: dict[str, deque[_Failure]] = {}
        self._base = ""

    def routes(self, app: web.Application, prefix: str = "/v1") -> None:
        app.router.add_post(f"{prefix}/audio/transcriptions", self._transcriptions)
        app.router.add_post(f"{prefix}/audio/speech", self._speech)
        app.router.add_post(f"{prefix}/images/generations", self._images)
        app.router.add_get(f"{prefix}/generated/image.png", self._generated)

    def fail(self, path: str, status: int, message: str, *, times: int = 1) -> None:
        queue = self._failures.setdefault(path, deque())
        queue.extend(_Failure(status, message) for _ in range(times))

    def calls_to(self, path: str) -> list[MediaCall]:
        return [c for c in self.calls if c.path == path]

    def _failure(self, path: str) -> web.Response | None:
        queue = self._failures.get(path)
        if not queue:
            return None
        failure = queue.popleft()
        body = {"error": {"message": failure.message, "type": "error"}}
        return web.json_response(body, status=failure.status)

    async def _transcriptions(self, request: web.Request) -> web.Response:
        form = await request.post()
        call = MediaCall(
            "/audio/transcriptions",
            {k: v for k, v in form.items() if isinstance(v, str)},
            authorization=request.headers.get("Authorization", ""),
        )
        upload = form.get("file")
        if isinstance(upload, web.FileField):
            call.file_name, call.file_type = upload.filename, upload.content_type
            call.file_data = upload.file.read()
        self.calls.append(call)
        failed = self._failure(call.path)
        if failed is not None:
            return failed
        if not call.file_data or "model" not in call.fields:
            return web.json_response(
                {"error": {"message": "file and model are required"}}, status=400
            )
        text = self.transcripts.popleft() if self.transcripts else self.default_transcript
        return web.json_response({"text": text})

    async def _json_call(self, path: str, request: web.Request) -> MediaCall:
        body = await request.json()
        call = MediaCall(
            path,
            {k: v for k, v in body.items() if isinstance(v, str)},
            body,
            authorization=request.headers.get("Authorization", ""),
        )
        self.calls.append(call)
        return call

    async def _speech(self, request: web.Request) -> web.Response:
        call = await self._json_call("/audio/speech", request)
        failed = self._failure(call.path)
        if failed is not None:
            return failed
        return web.Response(body=self.speech, content_type="audio/ogg")

    async def _images(self, request: web.Request) -> web.Response:
        call = await self._json_call("/images/generations", request)
        self._base = f"{request.scheme}://{request.host}{request.path.rsplit('/images/', 1)[0]}"
        failed = self._failure(call.path)
        if failed is not None:
            return failed
        if self.image_as_url:
            item = {"url": f"{self._base}/generated/image.png"}
        else:
            item = {"b64_json": base64.b64encode(self.image).decode()}
        return web.Response(
            text=json.dumps({"created": 0, "data": [item]}), content_type="application/json"
        )

    async def _generated(self, request: web.Request) -> web.Response:
        return web.Response(body=self.image, content_type="image/png")


class FakeMediaAPI(LocalServer):
    """The media endpoints on a server of their own (a separate speech or image service)."""

    def __init__(self) -> None:
        super().__init__()
        self.media = MediaEndpoints()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def routes(self, app: web.Application) -> None:
        self.media.routes(app)
