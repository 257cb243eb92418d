"""Microsoft Teams end to end: the Teams adapter (the Agents SDK's activity models and
ConnectorClient) in the real gateway, against the fake Bot Framework (a local issuer, token
endpoint and Bot Connector), the scripted LLM and a private redis-server."""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import BaseModel

from adapters.teams import TeamsAdapter, TeamsStartError
from gateway.app.app import App
from gateway.config import Settings
from gateway.sdk.channels import DeliveryError
from gateway.sdk.messages import ChatKind, ChatRef, Outbound
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolSpec
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.teams import (
    ALICE,
    APP_ID,
    BOB,
    CHANNEL,
    GROUP,
    PERSONAL,
    TENANT,
    FakeBotFramework,
)
from tests.harness import configured_gateway, eventually, gateway_settings
from tests.media_samples import PDF, image_parts, png
from tools.files.workspaces import Workspaces

pytestmark = pytest.mark.e2e


def settings_for(
    tmp_path: Path,
    llm: ScriptedLLM,
    bf: FakeBotFramework,
    redis_url: str,
    *,
    teams: dict[str, Any] | None = None,
    **sections: Any,
) -> Settings:
    return gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        http={"enabled": True, "port": 0},
        scheduler={"enabled": False},
        teams=bf.settings(**(teams or {})),
        **sections,
    )


@pytest.fixture
async def bf() -> AsyncIterator[FakeBotFramework]:
    async with FakeBotFramework() as server:
        yield server


@pytest.fixture
async def gw(
    tmp_path: Path, llm: ScriptedLLM, bf: FakeBotFramework, redis_url: str
) -> AsyncIterator[App]:
    async with configured_gateway(settings_for(tmp_path, llm, bf, redis_url)) as app:
        yield app


def endpoint(app: App) -> str:
    assert app.http is not None and app.http.port
    return f"http://127.0.0.1:{app.http.port}/teams/messages"


STORY = "First words of the answer, then more of it, and finally the end of it."


async def test_personal_chat_streams_with_teams_streaming(
    gw: App, bf: FakeBotFramework, llm: ScriptedLLM
) -> None:
    llm.push(Reply.streamed(STORY, chunks=6, delay=0.6))
    status = await bf.deliver(endpoint(gw), bf.activity(PERSONAL, text="tell me a story"))
    assert status == 200
    final = await bf.wait_for_text(STORY)
    assert last_user_text(llm.requests[0]) == "tell me a story"
    chunks = bf.stream_chunks()
    assert len(chunks) >= 2 and all(c.conversation == PERSONAL for c in chunks)
    infos = [_info(c) for c in chunks]
    # The first chunk opens the stream; the rest name it, with growing sequence numbers.
    assert "streamId" not in infos[0] and infos[0]["streamSequence"] == 1
    stream_id = infos[1]["streamId"]
    assert all(i["streamId"] == stream_id for i in infos[1:])
    assert [i["streamSequence"] for i in infos] == list(range(1, len(infos) + 1))
    assert all(STORY.startswith(c.body["text"]) for c in chunks)
    # Then the final message ends it: the whole answer, no post and no edit besides.
    assert final.body["type"] == "message"
    assert _info(final) == {"type": "streaminfo", "streamType": "final", "streamId": stream_id}
    assert final.body["textFormat"] == "markdown"
    assert bf.updates() == [] and len(bf.sent()) == 1 and bf.streams == {}
    # One chunk per streaming interval (1.5 s by default) while the model writes.
    times = [c.at for c in chunks]
    assert all(b - a >= 1.4 for a, b in itertools.pairwise(times))
    assert bf.token_requests[0]["client_id"] == APP_ID


async def test_tool_calls_show_as_informative_updates_of_the_stream(
    gw: App, bf: FakeBotFramework, llm: ScriptedLLM
) -> None:
    async def lookup(args: _Command, ctx: ToolContext) -> str:
        await asyncio.sleep(2.0)
        return "found it"

    gw.tools.register(ToolSpec("lookup", "looks things up", _Command, lookup, "test"))
    llm.push(
        Reply.call("lookup", command="the weather"), Reply.streamed(STORY, chunks=4, delay=0.5)
    )
    assert await bf.deliver(endpoint(gw), bf.activity(PERSONAL, text="weather?")) == 200
    final = await bf.wait_for_text(STORY)
    infos = [_info(c) for c in bf.stream_chunks()]
    # While the tool runs: an informative line; then the answer streams in the same stream.
    assert infos[0]["streamType"] == "informative"
    assert "lookup" in bf.stream_chunks()[0].body["text"]
    assert infos[-1]["streamType"] == "streaming"
    assert [i["streamSequence"] for i in infos] == list(range(1, len(infos) + 1))
    assert _info(final)["streamId"] == infos[-1]["streamId"]


async def test_where_teams_does_not_stream_the_reply_is_posted_then_updated(
    gw: App, bf: FakeBotFramework, llm: ScriptedLLM
) -> None:
    bf.streaming = False  # a bot or tenant without Teams streaming
    llm.push(Reply.streamed(STORY, chunks=6, delay=0.6))
    assert await bf.deliver(endpoint(gw), bf.activity(PERSONAL, text="tell me a story")) == 200
    final = await bf.wait_for_text(STORY)
    posted = bf.sent()
    assert len(posted) == 1 and posted[0].conversation == PERSONAL
    assert STORY.startswith(posted[0].body["text"]) and posted[0].body["text"] != STORY
    updates = bf.updates()
    assert updates and final is updates[-1]
    assert {u.activity_id for u in updates} == {posted[0].body.get("id") or "bot-1"}
    # While the model writes, one update per streaming interval; the final text follows
    # as soon as the answer is complete.
    times = [posted[0].at] + [u.at for u in updates[:-1]]
    assert all(b - a >= 1.4 for a, b in itertools.pairwise(times))
    assert bf.sent("typing")  # the typing indicator while the turn ran

    # Group chats have no streaming: post, then update, there too.
    llm.push(Reply.streamed(STORY, chunks=6, delay=0.6))
    ask = bf.activity(GROUP, text="and here?", kind="groupChat", mention=True)
    assert await bf.deliver(endpoint(gw), ask) == 200
    await bf.wait_until(
        lambda: [u for u in bf.updates() if u.conversation == GROUP and u.body["text"] == STORY],
        what="the group reply updated to the whole answer",
    )
    assert not bf.stream_chunks()


def _info(call: Any) -> dict[str, Any]:
    [info] = [e for e in call.body["entities"] if e["type"] == "streaminfo"]
    return dict(info)


async def test_channel_and_group_messages_need_a_mention(
    gw: App, bf: FakeBotFramework, llm: ScriptedLLM
) -> None:
    url = endpoint(gw)
    thread = f"{CHANNEL};messageid=1700000000001"
    quiet = bf.activity(thread, text="just chatting", kind="channel")
    assert await bf.deliver(url, quiet) == 200
    group = bf.activity(GROUP, text="anyone?", kind="groupChat")
    assert await bf.deliver(url, group) == 200
    asked = bf.activity(thread, text="what time is it?", kind="channel", mention=True)
    assert await bf.deliver(url, asked) == 200
    [answer] = await bf.wait_until(bf.sent, what="the answer")
    # Answered in the channel thread it was asked in; what was not addressed to the bot is
    # only context for the question that was.
    assert answer.conversation == thread
    # The channel's earlier message reaches the model as context, marked as data.
    assert answer.body["text"].endswith(
        '<untrusted-data source="chat messages">\nAlice: just chatting\n</untrusted-data>'
        "\n\nAlice: what time is it?"
    )
    assert len(llm.requests) == 1
    mentioned = bf.activity(GROUP, text="and you?", kind="groupChat", mention=True)
    assert await bf.deliver(url, mentioned) == 200
    await bf.wait_until(
        lambda: any(c.body.get("text", "").endswith("Alice: and you?") for c in bf.sent()),
        what="the group answer",
    )
    assert bf.sent()[-1].conversation == GROUP


class _Command(BaseModel):
    command: str


async def test_approval_card_counts_only_the_requesters_submit(
    gw: App, bf: FakeBotFramework, llm: ScriptedLLM
) -> None:
    ran: list[str] = []

    async def run(args: _Command, ctx: ToolContext) -> str:
        ran.append(args.command)
        return f"ran {args.command}: ok"

    async def needs(args: _Command, ctx: ToolContext) -> ApprovalNeed:
        return ApprovalNeed(summary=args.command, reason="it deletes files", shape=args.command)

    gw.tools.register(ToolSpec("danger", "runs things", _Command, run, "test", needs))
    llm.push(Reply.call("danger", command="rm -rf build"), Reply.text("Cleaned up."))
    thread = f"{CHANNEL};messageid=1700000000002"
    url = endpoint(gw)
    ask = bf.activity(thread, text="clean the build", kind="channel", mention=True)
    assert await bf.deliver(url, ask) == 200

    def card() -> Any:
        for call in bf.sent():
            for attachment in call.body.get("attachments") or []:
                if attachment["contentType"] == "application/vnd.microsoft.card.adaptive":
                    return call, attachment["content"]
        return None

    posted, content = await bf.wait_until(card, what="the approval card")
    assert posted.conversation == thread
    approve = next(a for a in content["actions"] if a["title"] == "Approve once")
    assert approve["type"] == "Action.Submit"
    card_id = "bot-1"

    submit = bf.submit(thread, card_id, approve["data"], sender=BOB, kind="channel")
    assert await bf.deliver(url, submit) == 200  # not the requester, not an admin
    refusal = await bf.wait_until(
        lambda: [c for c in bf.sent() if "Only Alice" in (c.body.get("text") or "")],
        what="the refusal",
    )
    assert refusal[0].body["text"].startswith("Bob: ")
    assert bf.updates() == [] and ran == []

    submit = bf.submit(thread, card_id, approve["data"], sender=ALICE, kind="channel")
    assert await bf.deliver(url, submit) == 200
    await bf.wait_for_text("Cleaned up.")
    assert ran == ["rm -rf build"]
    update = await bf.wait_until(bf.updates, what="the card updated")
    assert update[0].activity_id == card_id and update[0].conversation == thread
    assert "approved" in update[0].body["text"].lower()
    assert not update[0].body.get("attachments")  # the buttons are gone


async def test_files_in_and_out_of_a_personal_chat(
    gw: App, bf: FakeBotFramework, llm: ScriptedLLM
) -> None:
    image, report = png(64, 48), PDF + b"numbers" * 200
    bf.files["board.png"] = (image, "image/png")
    bf.files["q3.pdf"] = (report, "application/pdf")
    attachments = [
        {"contentType": "image/png", "contentUrl": f"{bf.service_url}attachments/board.png"},
        {
            "contentType": "application/vnd.microsoft.teams.file.download.info",
            "name": "q3.pdf",
            "content": {
                "downloadUrl": f"{bf.url}/sharepoint/q3.pdf?tempauth=ok",
                "uniqueId": "u1",
                "fileType": "pdf",
            },
        },
        {"contentType": "text/html", "content": "<div>keep these</div>"},
    ]
    llm.push(Reply.text("A board and a report."))
    message = bf.activity(PERSONAL, text="keep these", attachments=attachments)
    assert await bf.deliver(endpoint(gw), message) == 200
    await bf.wait_for_text("A board and a report.")
    [seen] = image_parts(llm.requests[0])
    assert seen.size == (64, 48)
    # The connector's attachment with the bot's token; SharePoint's link without it.
    connector = bf.downloads[0]
    assert connector[0] == "/connector/attachments/board.png"
    assert connector[1] is not None and connector[1].startswith("Bearer bf-")
    assert "q3.pdf" in last_user_text(llm.requests[0])

    folder = gw.settings.workspace.joinpath(
        *Workspaces(gw.settings.workspace).folder(ChatRef(platform="teams", chat_id=PERSONAL))
    )
    (folder / "out").mkdir(parents=True)
    (folder / "out/report.pdf").write_bytes(report)
    llm.push(Reply.calls(("send_file", {"path": "out/report.pdf"})), Reply.text("Offered it."))
    ask = bf.activity(PERSONAL, text="send me the report")
    assert await bf.deliver(endpoint(gw), ask) == 200
    await bf.wait_for_text("Offered it.")
    consent = next(
        (c, a)
        for c in bf.sent()
        for a in c.body.get("attachments") or []
        if a["contentType"] == "application/vnd.microsoft.teams.card.file.consent"
    )
    _, card = consent
    assert card["name"] == "report.pdf" and card["content"]["sizeInBytes"] == len(report)
    accept = bf.activity(
        PERSONAL,
        type="invoke",
        name="fileConsent/invoke",
        replyToId="bot-consent",
        value={
            "type": "fileUpload",
            "action": "accept",
            "context": card["content"]["acceptContext"],
            "uploadInfo": {
                "name": "report.pdf",
                "uploadUrl": f"{bf.url}/onedrive/report.pdf",
                "contentUrl": "https://contoso-my.sharepoint.com/personal/alice/report.pdf",
                "uniqueId": "drive-item-1",
                "fileType": "pdf",
            },
        },
    )
    assert await bf.deliver(endpoint(gw), accept) == 200
    await bf.wait_until(lambda: "report.pdf" in bf.uploads, what="the upload")
    assert bf.uploads["report.pdf"] == report
    info = await bf.wait_until(
        lambda: [
            a
            for c in bf.sent()
            for a in c.body.get("attachments") or []
            if a["contentType"] == "application/vnd.microsoft.teams.card.file.info"
        ],
        what="the file card",
    )
    assert info[0]["content"]["uniqueId"] == "drive-item-1"
    await bf.wait_for_text("Sent: report.pdf")  # the consent card replaced


async def test_forged_or_missing_tokens_are_refused_before_the_body_is_read(
    gw: App, bf: FakeBotFramework, llm: ScriptedLLM
) -> None:
    url = endpoint(gw)
    good = bf.activity(PERSONAL, text="hi")
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for token in (
        bf.token(key=other_key),  # signed by a key the issuer does not hold
        bf.token(audience="someone-else"),
        bf.token(issuer="https://evil.example"),
        bf.token(expires_in=-3600),
        "not-a-jwt",
    ):
        assert await bf.deliver(url, good, token) == 401
        # The same with a body that would not even parse: refused for the token first.
        assert await bf.deliver(url, b"{not json", token) == 401
    assert await bf.deliver(url, good, unauthenticated=True) == 401
    # A real token for another serviceUrl: the activity may not name this one.
    stolen = bf.token(service_url="https://elsewhere.example/")
    assert await bf.deliver(url, good, stolen) == 403
    assert llm.requests == [] and bf.calls == []


async def test_malformed_bodies_get_4xx(gw: App, bf: FakeBotFramework) -> None:
    url = endpoint(gw)
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]
    no_conversation = bf.activity(PERSONAL, text="hi")
    del no_conversation["conversation"]
    no_sender = bf.activity(PERSONAL, text="hi")
    del no_sender["from"]
    for body, expected in (
        (b"{not json", 400),
        (b"\xff\xfe", 400),
        (b"[]", 400),
        (json.dumps({"type": 5}).encode(), 400),
        (json.dumps({"type": "message"}).encode(), 400),
        (json.dumps(deep).encode(), 400),
        (json.dumps(no_conversation).encode(), 400),
        (json.dumps(no_sender).encode(), 400),
        (json.dumps({**bf.activity(PERSONAL), "attachments": "nope"}).encode(), 400),
        (json.dumps({**bf.activity(PERSONAL), "channelId": ""}).encode(), 400),
    ):
        assert await bf.deliver(url, body) == expected, body[:60]
    form = bf.activity(PERSONAL, text="hi")
    status = await bf.deliver(url, json.dumps(form).encode(), content_type="text/plain")
    assert status == 415
    assert bf.calls == []


async def test_activities_from_a_tenant_not_allowed_or_over_http_are_refused(
    tmp_path: Path, llm: ScriptedLLM, bf: FakeBotFramework, redis_url: str
) -> None:
    settings = settings_for(tmp_path, llm, bf, redis_url, teams={"allowed_tenants": ["ours"]})
    async with configured_gateway(settings) as app:
        assert await bf.deliver(endpoint(app), bf.activity(PERSONAL, text="hi")) == 403
    # Without teams.allow_local_urls a plain-HTTP serviceUrl is never answered.
    settings = settings_for(tmp_path, llm, bf, redis_url, teams={"allow_local_urls": False})
    async with configured_gateway(settings) as app:
        assert await bf.deliver(endpoint(app), bf.activity(PERSONAL, text="hi")) == 403
    assert llm.requests == [] and bf.calls == []


async def test_throttling_and_a_revoked_token_are_retried(
    gw: App, bf: FakeBotFramework, llm: ScriptedLLM
) -> None:
    assert await bf.deliver(endpoint(gw), bf.activity(PERSONAL, text="one")) == 200
    await bf.wait_for_text("echo: one")
    # The session is idle again before "two", so no "answer after" notice takes the 429.
    await eventually(lambda: gw.queue.sessions_here == 0, 10, "the first turn finished")
    assert len(bf.token_requests) == 1  # the token is cached between calls
    bf.tokens.clear()  # the token stops working: the next call gets 401, then a new one
    bf.failures = [(429, {"Retry-After": "1"}), (503, {})]
    assert await bf.deliver(endpoint(gw), bf.activity(PERSONAL, text="two")) == 200
    answer = await bf.wait_for_text("echo: two")
    assert len(bf.token_requests) >= 2
    failed = [c for c in bf.calls if c.method == "FAILED"]
    assert len(failed) == 2 and answer.at - failed[0].at >= 1.0  # Retry-After honoured


async def test_replicas_share_the_work_an_approval_pressed_at_another_replica(
    tmp_path: Path, llm: ScriptedLLM, bf: FakeBotFramework, redis_url: str
) -> None:
    shared: dict[str, Any] = {
        "key_prefix": f"teams{uuid.uuid4().hex[:8]}",
        "approvals": {"secret": "two-replicas-share-this-secret"},
    }
    ran: list[str] = []

    async def run(args: _Command, ctx: ToolContext) -> str:
        ran.append(args.command)
        return "done"

    async def needs(args: _Command, ctx: ToolContext) -> ApprovalNeed:
        return ApprovalNeed(summary=args.command, reason="it deploys", shape=args.command)

    first = settings_for(tmp_path / "a", llm, bf, redis_url, **shared)
    second = settings_for(tmp_path / "b", llm, bf, redis_url, **shared)
    async with configured_gateway(first) as a, configured_gateway(second) as b:
        for app in (a, b):
            app.tools.register(ToolSpec("deploy", "deploys", _Command, run, "test", needs))
        llm.push(Reply.call("deploy", command="ship v2"), Reply.text("Shipped."))
        assert await bf.deliver(endpoint(a), bf.activity(PERSONAL, text="ship it")) == 200
        card = await bf.wait_until(
            lambda: [c for c in bf.sent() if c.body.get("attachments")], what="the card"
        )
        approve = next(
            action
            for action in card[0].body["attachments"][0]["content"]["actions"]
            if action["title"] == "Approve once"
        )
        # The submit reaches the other replica; it decides, the first one's turn goes on.
        submit = bf.submit(PERSONAL, "bot-1", approve["data"], sender=ALICE)
        assert await bf.deliver(endpoint(b), submit) == 200
        await bf.wait_for_text("Shipped.")
        assert ran == ["ship v2"]
        assert (await bf.wait_until(bf.updates, what="the card updated"))[0].activity_id == "bot-1"


async def test_an_unreadable_certificate_stops_the_start_with_one_line(
    tmp_path: Path, llm: ScriptedLLM, bf: FakeBotFramework
) -> None:
    (tmp_path / "bot.pem").write_text("not a certificate")
    teams = {"app_password": None, "certificate_path": str(tmp_path / "bot.pem")}
    app = App(settings_for(tmp_path, llm, bf, "", teams=teams))
    app.add_configured_adapters()
    adapter = app.outbox.adapter("teams")
    assert isinstance(adapter, TeamsAdapter)
    with pytest.raises(TeamsStartError, match=r"teams\.certificate_path \(ValueError\)"):
        await adapter.start()
    await app.store.close()
    await app.llm.aclose()


async def test_a_direct_message_goes_to_the_personal_chat_a_person_opened(
    gw: App, bf: FakeBotFramework, llm: ScriptedLLM
) -> None:
    with pytest.raises(DeliveryError, match="has not written to the bot"):
        await gw.outbox.direct_chat("teams", "aad-alice")
    assert await bf.deliver(endpoint(gw), bf.activity(PERSONAL, text="hi")) == 200
    await bf.wait_for_text("echo: hi")
    chat = await gw.outbox.direct_chat("teams", "aad-alice")
    assert (chat.chat_id, chat.kind, chat.space_id) == (PERSONAL, ChatKind.DIRECT, TENANT)
    await gw.outbox.send(Outbound(chat=chat, text="Your nightly job failed."))
    await bf.wait_for_text("Your nightly job failed.")
