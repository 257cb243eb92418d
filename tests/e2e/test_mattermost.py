"""The Mattermost adapter end to end: the real gateway against a fake Mattermost (REST API v4
and the WebSocket), the scripted LLM and a real redis-server.

Covers a DM streamed by editing its post, mention gating in channels, threads as sessions,
an approval by the requester's button (another member's press and forged callbacks change
nothing), files in and out, the slash command, and malformed or forged requests (4xx).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import BaseModel

from adapters.mattermost import MattermostAdapter
from adapters.mattermost.buttons import ActionSigner
from gateway.app.app import App
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolSpec
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.fakes.mattermost import (
    ALICE,
    BOB,
    BOT_ID,
    COMMAND_TOKEN,
    DM,
    TEAM_NAME,
    TOKEN,
    TOWN,
    FakeMattermost,
)
from tests.harness import gateway_settings
from tests.media_samples import PDF, image_parts, png
from tests.replicas import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

ANSWER = " ".join(f"word{n}" for n in range(40)) + "."
INTERVAL_MS = 300


@pytest.fixture
async def fake() -> AsyncIterator[FakeMattermost]:
    async with FakeMattermost() as server:
        yield server


@contextlib.asynccontextmanager
async def mattermost_app(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeMattermost,
    redis_url: str,
    *,
    key_prefix: str = "",
    port: int = 0,
    streaming: dict[str, Any] | None = None,
    **mattermost: Any,
) -> AsyncIterator[App]:
    """The real App with the Mattermost adapter configured, started and connected to the fake;
    the gateway listens on `port` (default: a free one), its public URL for button presses."""
    port = port or free_port()
    settings = gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        key_prefix=key_prefix,
        http={"enabled": True, "host": "127.0.0.1", "port": port},
        scheduler={"enabled": False},
        streaming=streaming or {"enabled": False},
        mattermost={
            "url": fake.url,
            "token": TOKEN,
            "team": TEAM_NAME,
            "command_token": COMMAND_TOKEN,
            "public_url": f"http://127.0.0.1:{port}",
            "leader_ttl": 2,
            **mattermost,
        },
    )
    app = App(settings)
    assert app.add_configured_adapters() == ["mattermost"]
    await app.start()
    try:
        await asyncio.wait_for(adapter_of(app).ready.wait(), 10)
        yield app
    finally:
        await app.stop()


def adapter_of(app: App) -> MattermostAdapter:
    adapter = app.outbox.adapter("mattermost")
    assert isinstance(adapter, MattermostAdapter)
    return adapter


def gateway_url(app: App, path: str) -> str:
    assert app.http is not None and app.http.port
    return f"http://127.0.0.1:{app.http.port}{path}"


def user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


async def test_dm_is_answered_and_streamed_by_editing_the_post(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeMattermost,
    redis_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    streaming = {"interval_ms": INTERVAL_MS, "first_delay_ms": 0}
    async with mattermost_app(tmp_path, llm, fake, redis_url, streaming=streaming):
        llm.push(Reply.streamed(ANSWER, chunks=15, delay=0.08))
        await fake.post_as(ALICE, DM, "tell me something, no mention needed")
        await fake.wait_until(lambda: any(p["message"] == ANSWER for p in fake.bot_posts(DM)))
    assert last_user_text(llm.requests[0]) == "tell me something, no mention needed"
    [post] = fake.bot_posts(DM)
    assert post["root_id"] == ""  # a DM is answered in the DM, not in a thread
    [created] = fake.calls_to("POST", "/posts")
    assert ANSWER.startswith(created.body["message"]) and created.body["message"] != ANSWER
    edits = fake.calls_to("PUT", rf"/posts/{post['id']}/patch")
    assert len(edits) >= 2 and edits[-1].body["message"] == ANSWER
    # While it is written, at most one update per streaming.interval_ms (never sooner; later
    # is fine on a busy machine); the final text lands as soon as the answer is complete.
    times = [created.at] + [edit.at for edit in edits[:-1]]
    assert min(b - a for a, b in itertools.pairwise(times)) >= INTERVAL_MS / 1000 - 0.05
    assert all(call.authorized for call in fake.calls)  # the bot token on every call...
    assert TOKEN not in caplog.text  # ...which no log line shows, even at DEBUG
    assert fake.calls_to("POST", rf"/users/{BOT_ID}/typing")


async def test_channel_needs_a_mention_and_is_answered_in_a_thread(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    async with mattermost_app(tmp_path, llm, fake, redis_url):
        await fake.post_as(BOB, TOWN, "just chatting, not for the bot")
        await fake.post_as(ALICE, TOWN, "talking about chatgate without the at sign")
        llm.push(Reply.text("Hello Alice!"))
        asked = await fake.post_as(ALICE, TOWN, "@chatgate hi there, ask @bob too")
        reply = await fake.wait_for_post(TOWN, "Hello Alice!", root_id=asked["id"])
    assert len(llm.requests) == 1
    assert last_user_text(llm.requests[0]) == "alice: hi there, ask @bob too"
    assert reply["user_id"] == BOT_ID


async def test_a_thread_is_its_own_session(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    async with mattermost_app(tmp_path, llm, fake, redis_url):
        llm.push(Reply.text("noted A"), Reply.text("in the thread"), Reply.text("new thread"))
        first = await fake.post_as(ALICE, TOWN, "@chatgate remember A")
        await fake.wait_for_post(TOWN, "noted A", root_id=first["id"])
        await fake.post_as(ALICE, TOWN, "@chatgate what did I say?", root_id=first["id"])
        await fake.wait_for_post(TOWN, "in the thread", root_id=first["id"])
        other = await fake.post_as(ALICE, TOWN, "@chatgate and here?")
        await fake.wait_for_post(TOWN, "new thread", root_id=other["id"])
    assert user_texts(llm.requests[1]) == ["alice: remember A", "alice: what did I say?"]
    assert user_texts(llm.requests[2]) == ["alice: and here?"]  # nothing from the other thread


async def test_channel_is_one_session_when_replies_are_not_threaded(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    async with mattermost_app(tmp_path, llm, fake, redis_url, reply_in_thread=False):
        llm.push(Reply.text("noted B"), Reply.text("you said B"))
        await fake.post_as(ALICE, TOWN, "@chatgate remember B")
        await fake.wait_for_post(TOWN, "noted B")
        await fake.post_as(ALICE, TOWN, "@chatgate what did I say?")
        await fake.wait_for_post(TOWN, "you said B")
    assert user_texts(llm.requests[1]) == ["alice: remember B", "alice: what did I say?"]


class _Cmd(BaseModel):
    command: str


async def test_approval_by_the_requesters_button(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    ran: list[str] = []

    async def handler(args: _Cmd, ctx: ToolContext) -> str:
        ran.append(args.command)
        return f"ran {args.command}: ok"

    async def approval(args: _Cmd, ctx: ToolContext) -> ApprovalNeed:
        return ApprovalNeed(summary=args.command, reason="it deletes files", shape=args.command)

    async with mattermost_app(tmp_path, llm, fake, redis_url) as app:
        app.tools.register(ToolSpec("danger", "runs things", _Cmd, handler, "test", approval))
        llm.push(Reply.call("danger", command="rm -rf build"), Reply.text("Deleted build/."))
        asked = await fake.post_as(ALICE, TOWN, "@chatgate clean the build")
        await fake.wait_until(lambda: any(fake.actions(p) for p in fake.bot_posts(TOWN)))
        prompt = next(p for p in fake.bot_posts(TOWN) if fake.actions(p))
        assert prompt["root_id"] == asked["id"]
        buttons = {
            a["integration"]["context"]["data"].rsplit(":", 1)[1]: a for a in fake.actions(prompt)
        }
        assert set(buttons) == {"once", "session", "deny", "always"}
        once = buttons["once"]
        shown = prompt["message"]

        # Another member's press: refused to them alone, the post and the tool untouched.
        status, answer = await fake.press(prompt["id"], once["id"], user_id=BOB)
        assert status == 200 and "Only alice or an admin" in answer["ephemeral_text"]
        assert prompt["message"] == shown and fake.actions(prompt) and not ran

        # Forged callbacks: a wrong secret, no secret, a secret for another channel.
        url = once["integration"]["url"]
        assert url == gateway_url(app, "/mattermost/actions/") + url.rsplit("/", 1)[1]
        context = dict(once["integration"]["context"])
        body = {"user_id": ALICE, "channel_id": TOWN, "post_id": prompt["id"]}
        wrong = {**context, "secret": "0" * 64}
        assert (await fake.post_json(url, {**body, "context": wrong}))[0] == 403
        no_secret = {k: v for k, v in context.items() if k != "secret"}
        assert (await fake.post_json(url, {**body, "context": no_secret}))[0] == 401
        assert (await fake.post_json(url, body))[0] == 401
        elsewhere = {**body, "channel_id": DM, "context": context}
        assert (await fake.post_json(url, elsewhere))[0] == 403
        forged_data = {**context, "data": context["data"].replace(":once", ":always")}
        assert (await fake.post_json(url, {**body, "context": forged_data}))[0] == 403
        assert not ran and fake.actions(prompt)

        # The requester's press decides; the post shows the outcome, without buttons.
        status, answer = await fake.press(prompt["id"], once["id"], user_id=ALICE)
        assert status == 200 and "update" in answer
        await fake.wait_for_post(TOWN, "Deleted build/.", root_id=asked["id"])
    assert ran == ["rm -rf build"]
    assert fake.actions(prompt) == [] and prompt["message"] != shown
    assert "ran rm -rf build: ok" in tool_results(llm.requests[1])[0]


async def test_a_file_in_reaches_the_model_and_files_go_out(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    photo = fake.add_file("screen.png", png(400, 300), "image/png")
    body = PDF + b"minutes" * 300
    document = fake.add_file("minutes.pdf", body, "application/pdf")
    chart = png(300, 200)
    llm.push(
        Reply.text("A screenshot."),
        Reply.calls(("save_attachment", {"file_id": document})),
        Reply.calls(("send_file", {"path": "chart.png", "caption": "Chart attached"})),
        Reply.text("Saved and sent."),
    )
    async with mattermost_app(tmp_path, llm, fake, redis_url) as gw:
        folder = gw.settings.workspace / f"mattermost-{DM}"
        folder.mkdir(parents=True)
        (folder / "chart.png").write_bytes(chart)
        await fake.post_as(ALICE, DM, "what is this?", file_ids=(photo,))
        await fake.wait_for_post(DM, "A screenshot.")
        await fake.post_as(ALICE, DM, "file this and send the chart", file_ids=(document,))
        await fake.wait_for_post(DM, "Saved and sent.")
    [image] = image_parts(llm.requests[0])
    assert image.format == "PNG"
    assert fake.file_gets[0] == photo
    assert tool_results(llm.requests[2]) == [
        f"saved attachments/minutes.pdf (application/pdf, {len(body):,} bytes)"
    ]
    assert (folder / "attachments/minutes.pdf").read_bytes() == body
    [with_file] = [p for p in fake.bot_posts(DM) if p["file_ids"]]
    [uploaded] = with_file["file_ids"]
    assert fake.files[uploaded].data == chart and with_file["message"] == "Chart attached"
    assert fake.files[uploaded].info["channel_id"] == DM


async def test_slash_command_is_answered_in_the_channel(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    async with mattermost_app(tmp_path, llm, fake, redis_url) as app:
        url = gateway_url(app, "/mattermost/command")
        status, body = await fake.slash(url, "hello", token="not-the-token")
        assert status == 401 and not llm.requests
        llm.push(Reply.text("Hello from the command."))
        status, body = await fake.slash(url, "what is up?")
        assert status == 200 and body == {"response_type": "ephemeral", "text": "Working on it…"}
        await fake.wait_for_post(TOWN, "Hello from the command.")
        status, body = await fake.slash(url, "new")  # `/chatgate new` is the chat command /new
        assert status == 200
        await fake.wait_until(lambda: len(fake.bot_posts(TOWN)) == 2)
    assert last_user_text(llm.requests[0]) == "alice: what is up?"
    assert len(llm.requests) == 1


async def test_malformed_and_forged_requests_get_4xx(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    async with mattermost_app(tmp_path, llm, fake, redis_url) as app:
        command = gateway_url(app, "/mattermost/command")
        tag = ActionSigner.from_settings("", TOKEN).url_tag()  # what the buttons point at
        actions = gateway_url(app, f"/mattermost/actions/{tag}")
        elsewhere = gateway_url(app, "/mattermost/actions/" + "0" * 32)
        good = {"Authorization": f"Token {COMMAND_TOKEN}"}
        form = {"Content-Type": "application/x-www-form-urlencoded", **good}
        cases: list[tuple[str, dict[str, str], bytes, int]] = [
            (command, {}, b"text=hi", 401),
            (command, {"Authorization": "Token "}, b"text=hi", 401),
            (command, {"Authorization": f"Bearer {COMMAND_TOKEN}"}, b"text=hi", 401),
            (command, {**good, "Content-Type": "application/json"}, b"{}", 415),
            (command, form, b"\xff\xfe", 400),
            (command, form, b"text=hi", 400),  # no channel, user or trigger
            (command, form, b"&".join([b"a=1"] * 200), 400),
            (elsewhere, {"Content-Type": "application/json"}, b"{not json", 401),
            (elsewhere, {"Content-Type": "application/json"}, b'{"context": {}}', 401),
            (actions, {"Content-Type": "text/plain"}, b"{}", 415),
            (actions, {"Content-Type": "application/json"}, b"{not json", 400),
            (actions, {"Content-Type": "application/json"}, b"[" * 5000 + b"]" * 5000, 400),
            (actions, {"Content-Type": "application/json"}, b"[1, 2]", 401),
            (actions, {"Content-Type": "application/json"}, b'{"context": "x"}', 401),
            (actions, {"Content-Type": "application/json"}, b'{"context": {"secret": 1}}', 403),
            (actions, {"Content-Type": "application/json"}, b"{" + b" " * 70_000 + b"}", 413),
        ]
        async with aiohttp.ClientSession() as session:
            for url, headers, data, expected in cases:
                async with session.post(url, data=data, headers=headers) as response:
                    assert response.status == expected, (url, headers, data[:40])
    assert not llm.requests


async def test_a_post_sent_while_the_socket_is_down_arrives_after_the_resume(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    async with mattermost_app(tmp_path, llm, fake, redis_url) as app:
        llm.push(Reply.text("first"), Reply.text("missed but answered"))
        await fake.post_as(ALICE, DM, "one")
        await fake.wait_for_post(DM, "first")
        await fake.drop()
        await fake.post_as(ALICE, DM, "sent while the bot was away")
        await fake.wait_for_post(DM, "missed but answered")
        assert adapter_of(app).ready.is_set()
    assert fake.resumed == 1 and fake.connections == 2
    assert last_user_text(llm.requests[1]) == "sent while the bot was away"


async def test_access_rules_refuse_with_a_reason(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    async with mattermost_app(
        tmp_path, llm, fake, redis_url, allowed_users=[BOB], allowed_channels=[TOWN]
    ):
        await fake.post_as(ALICE, DM, "let me in")
        await fake.wait_until(lambda: len(fake.bot_posts(DM)) == 1)
    [refusal] = fake.bot_posts(DM)
    assert "not allowed" in refusal["message"]
    assert not llm.requests


async def test_doctor_and_a_refused_token(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeMattermost, redis_url: str
) -> None:
    import httpx

    from adapters.mattermost.adapter import MattermostStartError
    from adapters.mattermost.plugin import PLUGIN
    from adapters.mattermost.settings import MattermostSettings

    check = PLUGIN.check
    assert check is not None
    async with httpx.AsyncClient() as http:
        good = await check(MattermostSettings(url=fake.url, token=TOKEN), http)
        bad = await check(MattermostSettings(url=fake.url, token="nope"), http)
    assert good.ok and "chatgate" in good.detail
    assert not bad.ok and "401" in bad.detail
    with pytest.raises(MattermostStartError, match=r"refused mattermost\.token"):
        async with mattermost_app(tmp_path, llm, fake, redis_url, token="nope"):
            pass
