"""Typed LLM failures: `str(exc)` is the detail for logs, `user_message` is the one line for chat.

Neither ever contains the API key: details pass through `Redactor` before an error is built.
"""

from __future__ import annotations

import re

from gateway.runtime.secrets import SecretRedactor


class LLMError(Exception):
    """Base class; `user_message` says in one sentence what the chat user can do next.

    `kind` names the failure for metrics and notes (server_error, timeout, rate_limited,
    auth, model_missing, ...); `switch_model` says whether another model may do better: the
    failure is one that retrying the same server will not fix soon.
    """

    default_user_message = "The AI model failed to answer; please try again in a moment."
    kind = "error"
    switch_model = False

    def __init__(
        self,
        detail: str,
        *,
        user_message: str | None = None,
        status: int | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.user_message = user_message or self.default_user_message
        self.status = status  # HTTP status from the server, when there was one
        if kind is not None:
            self.kind = kind


class LLMUnavailable(LLMError):
    """The server could not be reached or kept failing (connection, timeout, 5xx) after retries."""

    default_user_message = (
        "The AI model is not reachable right now; please try again in a few minutes."
    )
    kind = "unavailable"  # "timeout" and "server_error" when that is what happened
    switch_model = True


class LLMAuthError(LLMError):
    """The server refused the credentials (401/403)."""

    default_user_message = (
        "The AI model rejected the gateway's credentials; an admin needs to check llm.api_key."
    )
    kind = "auth"
    switch_model = True


class LLMRateLimited(LLMError):
    """429 after retries, or a Retry-After longer than the gateway is willing to wait."""

    kind = "rate_limited"
    switch_model = True

    def __init__(
        self,
        detail: str,
        *,
        retry_after: float | None = None,
        user_message: str | None = None,
        status: int | None = 429,
    ) -> None:
        if user_message is None:
            wait = (
                f"in about {max(1, round(retry_after))} seconds"
                if retry_after is not None and retry_after < 120
                else "in a few minutes"
            )
            user_message = f"The AI model is receiving too many requests; please try again {wait}."
        super().__init__(detail, user_message=user_message, status=status)
        self.retry_after = retry_after


class LLMContextTooLong(LLMError):
    """The conversation plus the request exceed the model's context window."""

    default_user_message = (
        "This conversation has grown too long for the AI model; "
        "please start a new conversation and try again."
    )
    kind = "context_too_long"


class LLMBadResponse(LLMError):
    """The server answered with something that is not a chat completion we can read."""

    default_user_message = "The AI model sent a reply the gateway could not read; please try again."
    kind = "bad_response"


class LLMRequestError(LLMError):
    """Any other refusal (4xx): unknown model, bad parameter, tools not supported."""

    default_user_message = (
        "The AI model refused the request; an admin should check the gateway's llm settings."
    )
    kind = "refused"


class LLMModelMissing(LLMRequestError):
    """The server does not serve the model (unknown model, not pulled, no chat endpoint)."""

    kind = "model_missing"
    switch_model = True


class LLMImagesRejected(LLMRequestError):
    """The server refused image input (a model without vision, a server without a projector)."""

    default_user_message = (
        "The AI model does not accept images; an admin should set llm.vision to "
        '"auto" or "off", or configure llm.vision_model.'
    )


# Statuses worth another attempt: timeouts, conflicts, rate limits and server trouble.
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})

_CONTEXT_WORDS = re.compile(
    r"context|too long|too many tokens|tokens? exceed|exceeds? .{0,40}tokens|maximum .{0,30}tokens"
    r"|prompt is too large|reduce the length",
    re.IGNORECASE,
)
_TOOLS_WORDS = re.compile(r"tool|function.?call", re.IGNORECASE)
# Servers word it many ways: "image_url is only supported by certain models" (OpenAI),
# "not a multimodal model" (vLLM), "image input is not supported ... mmproj" (llama.cpp,
# as a 500), "No endpoints found that support image input" (OpenRouter, as a 404).
_IMAGES_WORDS = re.compile(r"image|vision|multi-?modal|mmproj", re.IGNORECASE)
_IMAGES_STATUSES = frozenset({400, 404, 415, 422})
# A 5xx is retried unless it plainly says images are unsupported (llama.cpp's wording).
_IMAGES_UNSUPPORTED = re.compile(
    r"(image|vision|multi-?modal)[^.]{0,60}not supported|not support\w*[^.]{0,30}image|mmproj",
    re.IGNORECASE,
)
_MODEL_MISSING = re.compile(
    r"model.{0,120}(not found|does not exist|not exist|unknown|no such|not available|pull)"
    r"|(unknown|invalid|no such) model",
    re.IGNORECASE | re.DOTALL,
)


def mentions_context_limit(detail: str) -> bool:
    return bool(_CONTEXT_WORDS.search(detail))


def mentions_images(detail: str) -> bool:
    """An error about images: the model or server cannot take image input."""
    return bool(_IMAGES_WORDS.search(detail))


def mentions_tools(detail: str) -> bool:
    """A 400/422 about tools means the server (or model) cannot do native tool calling."""
    return bool(_TOOLS_WORDS.search(detail))


def error_for_status(
    status: int,
    server_message: str,
    *,
    model: str,
    endpoint: str,
    retry_after: float | None = None,
) -> LLMError:
    """Map an HTTP error answer to the typed error a caller can act on."""
    detail = f"HTTP {status} from {endpoint}"
    if server_message:
        detail += f": {server_message}"
    if status in (401, 403):
        return LLMAuthError(detail, status=status)
    if status == 429:
        return LLMRateLimited(detail, retry_after=retry_after, status=status)
    if status == 413 or (status in (400, 422) and mentions_context_limit(server_message)):
        return LLMContextTooLong(detail, status=status)
    if (status in _IMAGES_STATUSES and mentions_images(server_message)) or (
        status >= 500 and _IMAGES_UNSUPPORTED.search(server_message)
    ):
        return LLMImagesRejected(detail, status=status)
    if status >= 500:
        return LLMUnavailable(detail, status=status, kind="server_error")
    if status in (408, 409):
        return LLMUnavailable(detail, status=status, kind="timeout" if status == 408 else None)
    if status in (400, 422) and mentions_tools(server_message):
        return LLMRequestError(
            detail,
            status=status,
            user_message=(
                "The AI model does not support tool calling as configured; an admin should "
                'set llm.tool_call_format to "auto" or "text".'
            ),
        )
    if _MODEL_MISSING.search(server_message) or (status == 404 and "model" in server_message):
        return LLMModelMissing(
            detail,
            status=status,
            user_message=(
                f"The AI model '{model}' is not available on the server; "
                "an admin should check llm.model."
            ),
        )
    if status in (404, 405):
        return LLMModelMissing(
            detail,
            status=status,
            kind="no_endpoint",
            user_message=(
                "The AI server has no chat endpoint at the configured address; "
                "an admin should check llm.base_url."
            ),
        )
    return LLMRequestError(detail, status=status)


class Redactor(SecretRedactor):
    """Error details without secrets (API key, header values, bearer tokens), on one line of
    at most `limit` characters, for error strings and logs."""

    def __call__(self, text: str, limit: int = 400) -> str:
        text = " ".join(super().__call__(text).split())
        return text if len(text) <= limit else text[: limit - 1] + "…"
