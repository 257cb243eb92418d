"""read_channel is offered only where the platform's adapter can read history
(channels.ReadsHistory): a tool the registry leaves out of a scope, whatever the policy allows,
with the reason shown by `chatgate tools list --all`."""

from __future__ import annotations

from gateway.config import ToolsSettings
from gateway.sdk.channels import Outbox
from gateway.sdk.messages import ChatRef
from gateway.sdk.tooling import ToolScope
from tests.fakes.recording_adapter import RecordingAdapter
from tools.agent.read_channel import ReadChannelTools
from tools.policy import ToolPolicy
from tools.registry import ToolRegistry


class HistoryAdapter(RecordingAdapter):
    """An adapter that reads earlier messages, as Slack's and Discord's do."""

    async def read_history(
        self, chat: ChatRef, *, max_messages: int, max_chars: int
    ) -> tuple[str, ...]:
        return ("bob: hello",)


def scope(platform: str) -> ToolScope:
    return ToolScope(platform=platform, chat_id="1", provider="p", model="m")


def registry() -> ToolRegistry:
    outbox = Outbox()
    outbox.register(HistoryAdapter("slack"))
    outbox.register(RecordingAdapter("telegram"))
    found = ToolRegistry(ReadChannelTools(outbox, max_chars=1000).specs())
    found.set_filter(ToolPolicy(ToolsSettings(allow=["read_channel"])))
    return found


def test_offered_where_the_adapter_reads_history() -> None:
    tools = registry()
    assert [t.name for t in tools.for_scope(scope("slack"))] == ["read_channel"]
    assert tools.unavailable(scope("slack")) == {}


def test_not_offered_where_it_cannot_even_when_the_policy_allows_it() -> None:
    tools = registry()
    assert tools.for_scope(scope("telegram")) == []
    assert tools.unavailable(scope("telegram")) == {
        "read_channel": "no running telegram adapter can read earlier messages"
    }
    assert tools.for_scope(scope("matrix")) == []  # no adapter running for it at all
    assert tools.get("read_channel") is not None  # still known, so a refusal can name it
