"""A newcomer's first run: when no model is configured at all and nothing answers at the
default address, say exactly that and how to set one, instead of "not reachable right now"."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from gateway.config import Settings

# Keys that mean someone chose a model server on purpose.
_CHOSEN = {"base_url", "model", "api_key", "providers"}


def model_configured(settings: Settings) -> bool:
    """Whether the config file or the environment sets the model server (`[llm]` keys)."""
    return bool(_CHOSEN & settings.llm.model_fields_set)


def listening(url: str, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections at the URL's host and port."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            return True
    except OSError:
        return False


def no_model_message(settings: Settings) -> str | None:
    """The explanation to print when no model is configured and the default has no server;
    None when there is a model to talk to (or one was configured, reachable or not)."""
    if model_configured(settings):
        return None
    url = settings.llm.base_url
    if listening(url):
        return None
    return (
        "No AI model is configured. chatgate talks to an OpenAI-compatible server; with no "
        f"[llm] settings it looks for Ollama at {url}, and nothing is listening there.\n"
        "Set one, for example:\n"
        "  export CHATGATE_LLM__BASE_URL=https://api.openai.com/v1\n"
        "  export CHATGATE_LLM__API_KEY=sk-...\n"
        "  export CHATGATE_LLM__MODEL=gpt-4o-mini\n"
        "or the same keys (base_url, api_key, model) under [llm] in chatgate.toml; "
        "or start Ollama there: ollama serve, then ollama pull qwen3:8b.\n"
        "`chatgate doctor` checks the result."
    )
