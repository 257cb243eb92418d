"""Streaming with two replicas behind one Redis: the replica that runs the turn streams the
reply, and a /stop that reaches the other replica still ends that stream with "(stopped)"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_slack_events import settings_for
from tests.fakes.llm import Reply, ScriptedLLM
from tests.fakes.slack import FakeSlack, deliver, event_callback, events_url, mention, slack_gateway

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

ANSWER = " ".join(f"word{n}" for n in range(60))


async def test_stop_through_another_replica_ends_the_stream(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack, redis_url: str
) -> None:
    streaming = {"interval_ms": 150, "first_delay_ms": 0}
    one = settings_for(tmp_path / "a", llm, slack, redis_url, streaming=streaming)
    two = one.model_copy(update={"data_dir": tmp_path / "b"})
    async with slack_gateway(one) as a, slack_gateway(two) as b:
        llm.push(Reply.streamed(ANSWER, chunks=40, delay=0.1))
        asked = mention("write a lot", ts="1000.000100")
        await deliver(events_url(a), json.dumps(event_callback(asked)))
        await slack.wait_for("chat.appendStream", 2)
        stop = mention("/stop", ts="1000.000200", thread_ts="1000.000100")
        await deliver(events_url(b), json.dumps(event_callback(stop)))
        [ended] = await slack.wait_for("chat.stopStream")
        [shown] = [m for m in slack.bot_messages("C1") if m.ts == ended["ts"]]
        assert shown.text.endswith("\n\n(stopped)")
        written = shown.text.removesuffix("\n\n(stopped)")
        assert written and ANSWER.startswith(written) and written != ANSWER
        # Only one replica streamed: one stream, started once.
        assert len(slack.calls_to("chat.startStream")) == 1
        assert not any(m.text == ANSWER for m in slack.bot_messages())
