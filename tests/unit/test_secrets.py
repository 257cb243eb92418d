"""The one secret finder: logs redact what it finds, and the shell's environment drops it."""

from __future__ import annotations

import logging
from pathlib import Path

from gateway.app.app import load_settings
from gateway.llm.errors import Redactor
from gateway.runtime.logs import RedactingFilter
from gateway.runtime.secrets import SecretRedactor, secret_values


def test_every_kind_of_secret_in_the_settings_is_found(tmp_path: Path) -> None:
    settings = load_settings(
        None,
        data_dir=tmp_path,
        llm={"api_key": "sk-llm", "extra_headers": {"Authorization": "Bearer hdr-token"}},
        telegram={"token": "123:tg"},
        redis={"url": "redis://:redis-pw@127.0.0.1:6379/0"},
        tools={"web_search_provider": "brave", "web_search_api_key": "brave-key"},
    )
    found = set(secret_values(settings))
    assert {"sk-llm", "123:tg", "redis-pw", "brave-key", "hdr-token"} <= found
    # Ordinary values are not secrets, even under names that merely contain a word.
    assert "fake-model" not in found and str(tmp_path) not in found


def test_mappings_and_lists_are_searched_by_key_name() -> None:
    config = {
        "servers": {
            "github": {"env": {"GITHUB_TOKEN": "ghp_abc123", "HOME": "/home/x"}},
            "notes": {"headers": {"authorization": "Token t0k3n-value", "accept": "json"}},
        },
        "urls": ["https://user:url-pass@example.com/x"],
    }
    assert set(secret_values(config)) == {
        "ghp_abc123",
        "t0k3n-value",
        "Token t0k3n-value",
        "url-pass",
    }


def test_the_log_filter_redacts_what_the_finder_finds() -> None:
    redactor = RedactingFilter(secret_values({"api_key": "sk-live-123456"}))
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "calling with %s", ("sk-live-123456",), None
    )
    redactor.filter(record)
    assert record.getMessage() == "calling with ***"


def test_logs_and_llm_errors_redact_the_same_way() -> None:
    """One algorithm: the longer of two overlapping secrets goes whole, short values stay,
    and a bearer token is hidden even when it is not a configured secret."""
    secrets = ["abcdef", "abcdef-longer", "ab"]
    text = "key abcdef-longer, then abcdef; ab stays; Authorization: Bearer eyJhbGciOi.x.y"
    expected = "key ***, then ***; ab stays; Authorization: Bearer ***"
    log_filter = RedactingFilter(secrets)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s", (text,), None)
    log_filter.filter(record)
    assert record.getMessage() == expected
    assert Redactor(secrets)(text) == expected
    assert isinstance(Redactor(secrets), SecretRedactor)
