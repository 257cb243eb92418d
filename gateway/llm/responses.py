"""Reading what an OpenAI-compatible server answered: the JSON reply, or the LLMError that its
status, error body, broken stream or failed connection stands for, and whether to retry."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from gateway.llm.errors import (
    RETRYABLE_STATUSES,
    LLMBadResponse,
    LLMError,
    LLMImagesRejected,
    LLMUnavailable,
    Redactor,
    error_for_status,
)
from gateway.llm.retry import retry_after_seconds
from gateway.llm.stream import StreamErrorEvent
from gateway.llm.transport import Answer, TransportError
from gateway.llm.wire import RawReply, reply_from_body


class Body(Protocol):
    """A read answer's body, raw and as text (an Answer here, an httpx.Response in media)."""

    @property
    def content(self) -> bytes: ...

    @property
    def text(self) -> str: ...


class Retry(Exception):
    """A transient failure: the request may be sent again after a delay."""

    def __init__(self, error: LLMError, retry_after: float | None = None) -> None:
        super().__init__(error.detail)
        self.error = error
        self.retry_after = retry_after


@dataclass(frozen=True)
class Responses:
    """Turns one server's responses into replies or errors, with credentials redacted."""

    redact: Redactor
    model: str
    where: str  # the server's address without credentials, for messages
    endpoint: str

    def reply(self, answer: Answer) -> RawReply:
        """The reply in a successful answer's body."""
        try:
            body = json.loads(answer.content)
        except ValueError:
            raise LLMBadResponse(
                f"response is not JSON: {self.redact(answer.text, limit=120)!r}"
            ) from None
        if isinstance(body, dict) and body.get("error") and not body.get("choices"):
            # OpenRouter and some proxies report upstream failures as 200 + {"error": ...}.
            self.raise_error_event(StreamErrorEvent(body["error"]))
        return reply_from_body(body)

    def raise_error_event(self, event: StreamErrorEvent, *, delivered: bool = False) -> NoReturn:
        error = error_for_status(
            event.status, self.redact(str(event)), model=self.model, endpoint=self.endpoint
        )
        if event.status in RETRYABLE_STATUSES:
            stream_broken(error, delivered, None)
        raise error

    def raise_for_status(self, answer: Answer, endpoint: str) -> NoReturn:
        retry_after = retry_after_seconds(answer.headers)
        error = error_for_status(
            answer.status,
            self.redact(server_message(answer)),
            model=self.model,
            endpoint=endpoint,
            retry_after=retry_after,
        )
        if answer.status in RETRYABLE_STATUSES and not isinstance(error, LLMImagesRejected):
            raise Retry(error, retry_after)
        raise error

    def transport_error(self, exc: TransportError) -> LLMUnavailable:
        what = "timed out" if exc.timed_out else "failed"
        reason = self.redact(str(exc)) or type(exc).__name__
        return LLMUnavailable(
            f"request to {self.where} {what}: {reason}",
            kind="timeout" if exc.timed_out else "unreachable",
        )


def stream_broken(error: LLMError, delivered: bool, cause: BaseException | None) -> NoReturn:
    """Retry a broken stream unless the user already saw part of it."""
    if delivered:
        raise LLMBadResponse(
            f"the stream broke after part of the reply was shown ({error.detail})"
        ) from cause
    raise Retry(error) from cause


def server_message(response: Body) -> str:
    """The error text from the usual shapes: {"error": {"message"}}, {"error"}, {"detail"};
    not redacted."""
    try:
        data = json.loads(response.content)
    except ValueError:
        return response.text
    found: Any = data
    for _ in range(2):  # {"error": {"message": ...}} is two levels deep
        if not isinstance(found, dict):
            break
        found = next((found[k] for k in ("error", "message", "detail") if found.get(k)), found)
    return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)


def model_ids(answer: Answer) -> list[str] | None:
    """The model names in a /models listing, or None when it lists none we can read."""
    try:
        data = json.loads(answer.content)
    except ValueError:
        return None
    entries = data.get("data", data.get("models")) if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    ids = [e.get("id") or e.get("name") if isinstance(e, dict) else e for e in entries]
    return [i for i in ids if isinstance(i, str)]
