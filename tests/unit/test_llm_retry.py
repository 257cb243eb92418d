"""Retry timing, error classification and redaction."""

from __future__ import annotations

import pytest

from gateway.llm.errors import (
    LLMAuthError,
    LLMContextTooLong,
    LLMModelMissing,
    LLMRateLimited,
    LLMRequestError,
    LLMUnavailable,
    Redactor,
    error_for_status,
)
from gateway.llm.retry import backoff_delay, retry_after_seconds


def test_backoff_full_jitter_bounds() -> None:
    for attempt in range(12):
        delay = backoff_delay(attempt, 0.5, 30.0)
        assert 0.0 <= delay <= min(30.0, 0.5 * 2**attempt)
    assert backoff_delay(10_000, 0.5, 30.0) <= 30.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, 30.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
    ],
)
def test_retry_after(headers: dict[str, str], expected: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert retry_after_seconds(headers, now=now) == expected


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (401, "", LLMAuthError),
        (403, "forbidden", LLMAuthError),
        (429, "", LLMRateLimited),
        (400, "context_length_exceeded", LLMContextTooLong),
        (400, "prompt is too long: 250000 tokens > 200000 maximum", LLMContextTooLong),
        (413, "", LLMContextTooLong),
        (500, "", LLMUnavailable),
        (529, "overloaded", LLMUnavailable),
        (408, "", LLMUnavailable),
        (404, "The model `gpt-9` does not exist", LLMModelMissing),
        (400, "unsupported parameter: logit_bias", LLMRequestError),
    ],
)
def test_error_for_status(status: int, message: str, kind: type[Exception]) -> None:
    error = error_for_status(status, message, model="m", endpoint="/chat/completions")
    assert type(error) is kind
    assert error.status == status
    assert error.user_message.endswith(".") and "\n" not in error.user_message


def test_user_messages_name_the_setting_to_check() -> None:
    missing = error_for_status(404, "model 'm' not found", model="m", endpoint="/x")
    assert "'m'" in missing.user_message and "llm.model" in missing.user_message
    wrong_url = error_for_status(404, "404 page not found", model="m", endpoint="/x")
    assert "llm.base_url" in wrong_url.user_message
    tools = error_for_status(400, "tools are not supported", model="m", endpoint="/x")
    assert "tool_call_format" in tools.user_message


def test_rate_limited_says_when() -> None:
    assert "about 20 seconds" in LLMRateLimited("x", retry_after=20).user_message
    assert "few minutes" in LLMRateLimited("x").user_message


def test_redactor() -> None:
    redact = Redactor(["sk-abcdef123456", "", "ab"])
    text = "key sk-abcdef123456 and Authorization: Bearer eyJhbGciOi.x.y\nnext"
    assert redact(text) == "key *** and Authorization: Bearer *** next"
    assert len(redact("x" * 1000, limit=50)) == 50
