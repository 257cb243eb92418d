"""The LLM layer: an OpenAI-compatible client that always speaks native tool calls to its caller."""

from gateway.llm.client import LLMClient
from gateway.llm.errors import (
    LLMAuthError,
    LLMBadResponse,
    LLMContextTooLong,
    LLMError,
    LLMRateLimited,
    LLMRequestError,
    LLMUnavailable,
)
from gateway.llm.types import Completion, Message, ToolCall, Usage

__all__ = [
    "Completion",
    "LLMAuthError",
    "LLMBadResponse",
    "LLMClient",
    "LLMContextTooLong",
    "LLMError",
    "LLMRateLimited",
    "LLMRequestError",
    "LLMUnavailable",
    "Message",
    "ToolCall",
    "Usage",
]
