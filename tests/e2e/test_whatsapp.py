"""WhatsApp end to end: the real adapter in the real gateway (webhooks on its HTTP server),
against the fake Cloud API (tests/fakes/whatsapp.py), the scripted LLM and a private
redis-server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, SecretStr

from adapters.whatsapp import WhatsAppAdapter, WhatsAppStartError
from adapters.whatsapp.plugin import PLUGIN
from adapters.whatsapp.settings import WhatsAppSettings
from adapters.whatsapp.statuses import latest_status
from gateway.app.app import App
from gateway.config import Settings
from gateway.scheduling.jobs import RunStatus
from gateway.sdk.channels import DeliveryError
from gateway.sdk.messages import ChatKind, ChatRef, Outbound
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolSpec
from gateway.store import keys
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.whatsapp import (
    APP_SECRET,
    DISPLAY_NUMBER,
    TOKEN,
    VERIFY_TOKEN,
    FakeWhatsApp,
    post_webhook,
    verify_webhook,
)
from tests.fixtures_redis import RedisServer
from tests.harness import configured_gateway, eventually, gateway_settings
from tests.media_samples import PDF, image_parts, jpeg, ogg_opus, png

pytestmark = pytest.mark.e2e

ANA = "15551230001"
BEN = "15551230002"
TEMPLATE = "chatgate_notice"


@pytest.fixture
async def wa() -> AsyncIterator[FakeWhatsApp]:
    async with FakeWhatsApp(templates={TEMPLATE: ("en_US", 1)}) as server:
        yield server


def settings_for(
    tmp_path: Path,
    llm: ScriptedLLM,
    wa: FakeWhatsApp,
    redis_url: str,
    *,
    whatsapp: dict[str, Any] | None = None,
    **sections: Any,
) -> Settings:
    return gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        http={"enabled": True, "port": 0},
        scheduler=sections.pop("scheduler", {"enabled": False}),
        whatsapp={**wa.settings(), **(whatsapp or {})},
        **sections,
    )


@contextlib.asynccontextmanager
async def whatsapp_gateway(settings: Settings, wa: FakeWhatsApp) -> AsyncIterator[App]:
    """The gateway as `chatgate run` builds it; the fake sends its notifications to it."""
    async with configured_gateway(settings) as app:
        wa.webhook_url = webhook(app)
        yield app


@pytest.fixture
async def gw(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_url: str
) -> AsyncIterator[App]:
    async with whatsapp_gateway(settings_for(tmp_path, llm, wa, redis_url), wa) as app:
        yield app


def webhook(app: App) -> str:
    assert app.http is not None and app.http.port
    return f"http://127.0.0.1:{app.http.port}/whatsapp/webhook"


def adapter(app: App) -> WhatsAppAdapter:
    found = app.outbox.adapter("whatsapp")
    assert isinstance(found, WhatsAppAdapter)
    return found


async def test_verification_handshake(gw: App) -> None:
    ok = await verify_webhook(
        webhook(gw),
        **{
            "hub.mode": "subscribe",
            "hub.verify_token": VERIFY_TOKEN,
            "hub.challenge": "1158201444",
        },
    )
    assert (ok.status, ok.text) == (200, "1158201444")
    wrong = await verify_webhook(
        webhook(gw),
        **{"hub.mode": "subscribe", "hub.verify_token": "guess", "hub.challenge": "1"},
    )
    assert wrong.status == 403 and wrong.text != "1"
    not_subscribe = await verify_webhook(webhook(gw), **{"hub.verify_token": VERIFY_TOKEN})
    assert not_subscribe.status == 400


async def test_dm_answered_with_a_read_receipt_and_typing(
    gw: App, wa: FakeWhatsApp, llm: ScriptedLLM
) -> None:
    llm.push(Reply.text("**Done**: see [the docs](https://x.test/d)", delay=0.3))
    first = wa.text("my name is Ana", number=ANA)
    assert await wa.customer_sends(webhook(gw), first, names={ANA: "Ana"}) == 200
    reply = await wa.wait_text("*Done*: see the docs (https://x.test/d)")
    assert reply.to == ANA and reply.quoted == first["id"]
    assert reply.body["text"]["preview_url"] is False
    [receipt] = await wa.wait_receipts()
    assert receipt == {
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": first["id"],
        "typing_indicator": {"type": "text"},
    }
    second = wa.text("who am I?", number=ANA)
    await wa.customer_sends(webhook(gw), second, names={ANA: "Ana"})
    await wa.wait_text("echo: who am I?")
    # One session per number: the second turn sees the first exchange.
    contents = [m.get("content") for m in llm.requests[1]["messages"]]
    assert "my name is Ana" in contents and contents[-1] == "who am I?"


async def test_reply_context_reaction_and_long_text(
    gw: App, wa: FakeWhatsApp, llm: ScriptedLLM
) -> None:
    quoted = wa.text("which one?", number=ANA, context={"from": ANA, "id": "wamid.EARLIER"})
    await wa.customer_sends(webhook(gw), quoted)
    await wa.wait_sent(1)
    assert last_user_text(llm.requests[0]) == "[in reply to message wamid.EARLIER]\nwhich one?"
    reaction = wa.message(ANA, "reaction", {"message_id": wa.sent[0].message_id, "emoji": "👍"})
    await wa.customer_sends(webhook(gw), reaction)
    await wa.wait_sent(2)
    assert last_user_text(llm.requests[1]) == f"[reacted 👍 to message {wa.sent[0].message_id}]"
    llm.push(Reply.text("\n\n".join(f"Paragraph {n}: " + "lorem ipsum " * 60 for n in range(12))))
    await wa.customer_sends(webhook(gw), wa.text("write a lot", number=ANA))
    await wa.wait_sent(4)
    await asyncio.sleep(0.3)
    parts = [s for s in wa.sent[2:] if s.type == "text"]
    assert len(parts) >= 2 and all(len(p.text) <= 4096 for p in parts)
    assert parts[0].quoted is not None and parts[1].quoted is None


class _Command(BaseModel):
    command: str


async def test_approval_by_the_requesters_button_only(
    gw: App, wa: FakeWhatsApp, llm: ScriptedLLM
) -> None:
    ran = add_danger_tool(gw)
    llm.push(Reply.call("danger", command="rm -rf build"), Reply.text("Cleaned up."))
    await wa.customer_sends(webhook(gw), wa.text("clean the build", number=ANA))
    prompt = await wa.wait_buttons()
    assert prompt.to == ANA and "rm -rf build" in prompt.text
    assert list(prompt.button_ids()) == ["Approve once", "Approve for session", "Deny"]
    # "Always" does not fit three reply buttons: it comes as a list message after them.
    await eventually(lambda: len(wa.sent) >= 2, what="the list message")
    more = wa.sent[1]
    assert more.body["interactive"]["type"] == "list"
    assert list(more.button_ids()) == ["Always allow in this…"]
    assert more.body["interactive"]["action"]["sections"][0]["rows"][0]["description"] == (
        "Always allow in this chat"
    )

    # Ben presses Ana's button (the id copied into his own chat): refused, nothing runs.
    assert (
        await wa.customer_sends(webhook(gw), wa.button_press(prompt, "Approve once", number=BEN))
        == 200
    )
    refusal = await eventually_sent(wa, lambda s: s.to == BEN)
    assert refusal.text == "This approval request belongs to another chat."
    await asyncio.sleep(0.3)
    assert ran == [] and not [s for s in wa.sent if s.text == "Cleaned up."]

    press = wa.button_press(prompt, "Approve once", number=ANA)
    assert await wa.customer_sends(webhook(gw), press) == 200
    await wa.wait_text("Cleaned up.")
    assert ran == ["rm -rf build"]
    # WhatsApp cannot edit the prompt: the outcome is a message quoting it.
    outcome = await eventually_sent(wa, lambda s: s.to == ANA and s.quoted == prompt.message_id)
    assert "approved" in outcome.text.lower()
    # Meta sends the same press again: nothing more happens.
    count = len(wa.sent)
    again = await post_webhook(webhook(gw), json.dumps(wa.notification([press])).encode())
    assert again.status == 200
    await asyncio.sleep(0.3)
    assert len(wa.sent) == count


async def eventually_sent(wa: FakeWhatsApp, match: Any) -> Any:
    await eventually(lambda: any(match(s) for s in wa.sent), what="a matching message")
    return next(s for s in wa.sent if match(s))


async def test_image_in_reaches_the_model_and_files_go_out_uploaded(
    gw: App, wa: FakeWhatsApp, llm: ScriptedLLM
) -> None:
    photo = jpeg(1200, 900)
    media_id = wa.add_media(photo, "image/jpeg")
    llm.push(Reply.text("A red square."))
    image = wa.message(
        ANA, "image", {"id": media_id, "mime_type": "image/jpeg", "caption": "what is it?"}
    )
    await wa.customer_sends(webhook(gw), image)
    await wa.wait_text("A red square.")
    assert wa.downloads == [media_id]  # GET /{media-id}, then its URL with the token
    [seen] = image_parts(llm.requests[0])
    assert seen.size[0] > 0
    assert "what is it?" in last_user_text(llm.requests[0])

    folder = gw.settings.workspace / f"whatsapp-{ANA}"
    (folder / "out").mkdir(parents=True, exist_ok=True)
    chart, report = png(640, 480), PDF + b"x" * 5000
    (folder / "out/chart.png").write_bytes(chart)
    (folder / "out/report.pdf").write_bytes(report)
    llm.push(
        Reply.calls(("send_file", {"path": "out/chart.png", "caption": "The *chart*"})),
        Reply.calls(("send_file", {"path": "out/report.pdf"})),
        Reply.text("Both sent."),
    )
    await wa.customer_sends(webhook(gw), wa.text("send the chart and the report", number=ANA))
    await wa.wait_text("Both sent.")
    chart_msg = next(s for s in wa.sent if s.type == "image")
    doc_msg = next(s for s in wa.sent if s.type == "document")
    assert wa.media[chart_msg.body["image"]["id"]].data == chart
    assert chart_msg.body["image"]["caption"] == "The _chart_"
    assert wa.media[doc_msg.body["document"]["id"]].data == report
    assert doc_msg.body["document"]["filename"] == "report.pdf"
    assert [m.mime_type for m in wa.uploads()] == ["image/png", "application/pdf"]


async def test_voice_note_is_transcribed(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_url: str
) -> None:
    async with whatsapp_gateway(settings_for(tmp_path, llm, wa, redis_url), wa) as gw:
        media_id = wa.add_media(ogg_opus(), "audio/ogg; codecs=opus")
        llm.media.transcripts.append("book a room for three")
        llm.push(Reply.text("Booked."))
        voice = wa.message(
            ANA, "audio", {"id": media_id, "mime_type": "audio/ogg; codecs=opus", "voice": True}
        )
        await wa.customer_sends(webhook(gw), voice)
        await wa.wait_text("Booked.")
    [call] = llm.media.calls_to("/audio/transcriptions")
    assert call.file_data == ogg_opus()
    assert "book a room for three" in last_user_text(llm.requests[0])


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Hub-Signature-256": "sha256=" + "0" * 64},
        {"X-Hub-Signature-256": ""},  # none at all
        {"X-Hub-Signature-256": "md5=abc"},
    ],
    ids=["wrong", "missing", "not-sha256"],
)
async def test_forged_requests_refused_before_parsing(
    gw: App, wa: FakeWhatsApp, llm: ScriptedLLM, headers: dict[str, str]
) -> None:
    body = json.dumps(wa.notification([wa.text("rm -rf /", number=ANA)])).encode()
    assert (await post_webhook(webhook(gw), body, headers=headers)).status == 401
    # Signed with another secret; and a body that is not even JSON: 401, not 400, because
    # the signature is checked before anything reads the body.
    assert (await post_webhook(webhook(gw), body, secret="other-secret")).status == 401
    assert (await post_webhook(webhook(gw), b"{not json", headers=headers)).status == 401
    await asyncio.sleep(0.3)
    assert llm.requests == [] and wa.sent == []


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b'{"object": "page", "entry": []}',
        b'{"object": "whatsapp_business_account", "entry": {}}',
        b'{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",'
        b' "value": []}]}]}',
        b'{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",'
        b' "value": {"messages": [{"id": "x", "type": "text"}]}}]}]}',
        b'{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",'
        b' "value": {"messages": [{"from": "1", "id": "x", "type": "text", "text": "hi"}]}}]}]}',
        b'{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",'
        b' "value": {"statuses": [{"id": "x", "status": "exploded"}]}}]}]}',
        b"[" * 5000 + b"]" * 5000,
    ],
    ids=[
        "not-json",
        "not-utf8",
        "array",
        "other-object",
        "entry-not-list",
        "value-not-object",
        "message-without-from",
        "text-not-object",
        "unknown-status",
        "deep",
    ],
)
async def test_malformed_signed_bodies_are_400(
    gw: App, llm: ScriptedLLM, wa: FakeWhatsApp, raw: bytes
) -> None:
    delivery = await post_webhook(webhook(gw), raw)
    assert delivery.status == 400, delivery.text
    await asyncio.sleep(0.1)
    assert llm.requests == [] and wa.sent == []


async def test_statuses_are_tracked_and_failures_logged(
    gw: App, wa: FakeWhatsApp, caplog: pytest.LogCaptureFixture
) -> None:
    await wa.customer_sends(webhook(gw), wa.text("hi", number=ANA))
    reply = await wa.wait_text("echo: hi")

    async def latest() -> str | None:
        return await latest_status(gw.store, reply.message_id)

    # Read arrives before delivered (it happens): the further status stands.
    await wa.report_statuses(webhook(gw), wa.status(reply, "sent"), wa.status(reply, "read"))
    await eventually_async(latest, "read")
    assert await wa.report_statuses(webhook(gw), wa.status(reply, "delivered")) == 200
    await asyncio.sleep(0.2)
    assert await latest() == "read"

    error = {"code": 131026, "title": "Message undeliverable"}
    with caplog.at_level(logging.WARNING):
        assert await wa.report_statuses(webhook(gw), wa.status(reply, "failed", [error])) == 200
        await eventually_async(latest, "failed")
    assert "whatsapp message failed" in caplog.text and "codes=131026" in caplog.text
    assert TOKEN not in caplog.text and APP_SECRET not in caplog.text


async def eventually_async(read: Any, expected: Any, within: float = 8.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while (value := await read()) != expected:
        assert asyncio.get_running_loop().time() < deadline, f"{value!r} != {expected!r}"
        await asyncio.sleep(0.05)


async def test_reminder_outside_the_window_goes_as_the_template(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_url: str
) -> None:
    settings = settings_for(
        tmp_path,
        llm,
        wa,
        redis_url,
        whatsapp={"templates": {"name": TEMPLATE, "language": "en_US"}},
        scheduler={"leader_ttl": 1.0},
    )
    async with whatsapp_gateway(settings, wa) as gw:
        await wa.customer_sends(webhook(gw), wa.text("/remind 2s stretch", number=ANA))
        confirmation = await wa.wait_text_starting("Reminder ")
        job = confirmation.text.split()[1]
        wa.close_window(ANA)  # a day passes on WhatsApp's side (the gateway does not know)
        # WhatsApp accepts the free-form reminder, then reports it failed with 131047: it
        # goes again as the template.
        template = await wa.wait_type("template", seconds=10)
        [refused] = wa.window_failures
        assert "stretch" in refused.text and template.to == ANA
        assert template.body["template"]["name"] == TEMPLATE
        assert template.body["template"]["language"] == {"code": "en_US"}
        assert template.text == refused.text
        runs = await runs_of(gw, job)
        assert [r.status for r in runs] == [RunStatus.DELIVERED]
        # The adapter learnt that the window closed: the next message goes as the template
        # straight away, with no free-form attempt first.
        requests_before = len(wa.requests)
        chat = ChatRef(platform="whatsapp", chat_id=ANA, kind=ChatKind.DIRECT)
        sent = await adapter(gw).send(Outbound(chat=chat, text="job result:\n**all green**"))
        assert wa.sent[-1].type == "template" and wa.sent[-1].message_id == sent.message_id
        assert wa.sent[-1].text == "job result: *all green*"  # one line: WhatsApp's rule
        assert len(wa.requests) == requests_before + 1
        # A person who writes again opens the window: free-form once more.
        await wa.customer_sends(webhook(gw), wa.text("thanks", number=ANA))
        assert (await wa.wait_text("echo: thanks")).type == "text"


async def test_a_send_refused_outside_the_window_goes_as_the_template(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_url: str
) -> None:
    """Where WhatsApp refuses the request itself with 131047, the same happens at once."""
    wa.window_refusal = "request"
    template = {"templates": {"name": TEMPLATE, "language": "en_US"}}
    settings = settings_for(tmp_path, llm, wa, redis_url, whatsapp=template)
    async with whatsapp_gateway(settings, wa) as gw:
        await wa.customer_sends(webhook(gw), wa.text("hi", number=ANA))
        await wa.wait_text("echo: hi")
        wa.close_window(ANA)
        chat = ChatRef(platform="whatsapp", chat_id=ANA, kind=ChatKind.DIRECT)
        sent = await adapter(gw).send(Outbound(chat=chat, text="the nightly build failed"))
        assert wa.sent[-1].type == "template" and wa.sent[-1].message_id == sent.message_id
        assert wa.sent[-1].text == "the nightly build failed"


async def test_reminder_outside_the_window_without_template_is_reported(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_url: str
) -> None:
    web = {"admin_token": "console-token-for-tests-0123456789"}
    settings = settings_for(tmp_path, llm, wa, redis_url, scheduler={"leader_ttl": 1.0}, web=web)
    async with whatsapp_gateway(settings, wa) as gw:
        await wa.customer_sends(webhook(gw), wa.text("/remind 2s stretch", number=ANA))
        confirmation = await wa.wait_text_starting("Reminder ")
        job = confirmation.text.split()[1]
        sent_before = len(wa.sent)
        wa.close_window(ANA)
        await eventually(lambda: bool(wa.window_failures), 10, "the reminder's attempt")
        # WhatsApp's failed status says why; with no template it cannot go again, and the
        # console's recent errors say so.
        await eventually_async(lambda: console_says(gw, "undeliverable"), True, within=10)
        await eventually_async(lambda: console_says(gw, "codes=131047"), True, within=10)
        assert len(wa.sent) == sent_before
        # The gateway now knows the window is closed: a job result is refused outright, so
        # the scheduler records the run as failed (the console's job page shows why).
        chat = ChatRef(platform="whatsapp", chat_id=ANA, kind=ChatKind.DIRECT)
        with pytest.raises(DeliveryError, match="24 hours") as refused:
            await adapter(gw).send(Outbound(chat=chat, text="job result"))
        assert refused.value.permanent and "no template is configured" in str(refused.value)
        runs = await runs_of(gw, job)
        assert runs[0].status is RunStatus.DELIVERED  # WhatsApp had accepted the request
        assert len(wa.sent) == sent_before


async def console_says(gw: App, text: str) -> bool:
    entries = await gw.store.list_range(keys.RECENT_ERRORS, 0, -1)
    return any(text in json.loads(entry)["msg"] for entry in entries)


async def test_a_failed_reminder_run_is_recorded_when_the_window_is_known_closed(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_url: str
) -> None:
    settings = settings_for(tmp_path, llm, wa, redis_url, scheduler={"leader_ttl": 1.0})
    async with whatsapp_gateway(settings, wa) as gw:
        await wa.customer_sends(webhook(gw), wa.text("/remind 3s stretch", number=ANA))
        confirmation = await wa.wait_text_starting("Reminder ")
        job = confirmation.text.split()[1]
        # The gateway's own record says the window closed (as after a day without a word).
        await gw.store.delete(f"whatsapp:window:{ANA}")
        sent_before, requests_before = len(wa.sent), len(wa.requests)
        runs = await runs_of(gw, job, seconds=15)
        assert [r.status for r in runs] == [RunStatus.FAILED]
        assert runs[0].error is not None and "24 hours" in runs[0].error
        assert "no template is configured" in runs[0].error
        assert len(wa.sent) == sent_before and len(wa.requests) == requests_before


async def runs_of(gw: App, job: str, seconds: float = 10) -> list[Any]:
    deadline = asyncio.get_running_loop().time() + seconds
    while not (runs := await gw.scheduler.book.runs(job)):
        assert asyncio.get_running_loop().time() < deadline, "the job did not run"
        await asyncio.sleep(0.05)
    return runs


async def test_missing_settings_and_a_refused_token_fail_the_start(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp
) -> None:
    settings = settings_for(tmp_path, llm, wa, "", whatsapp={"access_token": "EAA-revoked"})
    app = App(settings)
    app.add_configured_adapters()
    with pytest.raises(WhatsAppStartError, match="CHATGATE_WHATSAPP__ACCESS_TOKEN"):
        await adapter(app).start()
    await app.store.close()
    await app.llm.aclose()


async def test_a_store_outage_is_503_and_metas_redelivery_is_answered_once(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_server: RedisServer
) -> None:
    settings = settings_for(tmp_path, llm, wa, redis_server.url, router={"lease_ttl": 2})
    async with whatsapp_gateway(settings, wa) as gw:
        message = wa.text("while the store is down", number=ANA)
        redis_server.stop()
        try:
            # Not stored, so not acknowledged: Meta keeps the notification and retries.
            assert await wa.customer_sends(webhook(gw), message) == 503
        finally:
            redis_server.start()
        await eventually_async(lambda: redelivered(wa, gw, message), 200, within=20)
        await wa.wait_text("echo: while the store is down", seconds=20)
        assert await wa.customer_sends(webhook(gw), message) == 200  # one more repeat
        await asyncio.sleep(0.5)
    assert [s.text for s in wa.sent].count("echo: while the store is down") == 1


async def redelivered(wa: FakeWhatsApp, gw: App, message: dict[str, Any]) -> int:
    return await wa.customer_sends(webhook(gw), message)


async def test_numbers_not_allowed_are_refused(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_url: str
) -> None:
    allowed = {"allowed_numbers": [f"+{ANA[0]} {ANA[1:4]} {ANA[4:]}"]}  # as people write it
    settings = settings_for(tmp_path, llm, wa, redis_url, whatsapp=allowed)
    async with whatsapp_gateway(settings, wa) as gw:
        await wa.customer_sends(webhook(gw), wa.text("let me in", number=BEN))
        refusal = await eventually_sent(wa, lambda s: s.to == BEN)
        assert "not allowed" in refusal.text.lower()
        await wa.customer_sends(webhook(gw), wa.text("hello", number=ANA))
        await wa.wait_text("echo: hello")
    assert len(llm.requests) == 1


async def test_doctor_checks_the_token_and_the_number(wa: FakeWhatsApp) -> None:
    good = WhatsAppSettings(**wa.settings())
    async with httpx.AsyncClient() as http:
        passed = await PLUGIN.check(good, http)  # type: ignore[misc]
        assert passed.ok and DISPLAY_NUMBER in passed.detail
        revoked = good.model_copy(update={"access_token": SecretStr("EAA-revoked")})
        failed = await PLUGIN.check(revoked, http)  # type: ignore[misc]
    assert not failed.ok and "401" in failed.detail
    assert "CHATGATE_WHATSAPP__ACCESS_TOKEN" in failed.fix


async def test_text_to_speech_goes_out_as_an_audio_message(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_url: str
) -> None:
    settings = settings_for(tmp_path, llm, wa, redis_url, tts={"base_url": llm.url})
    async with whatsapp_gateway(settings, wa) as gw:
        llm.push(Reply.calls(("text_to_speech", {"text": "Hello Ana"})), Reply.text("Said it."))
        await wa.customer_sends(webhook(gw), wa.text("say hello", number=ANA))
        await wa.wait_text("Said it.")
    [voice] = [s for s in wa.sent if s.type == "audio"]
    assert "caption" not in voice.body["audio"]  # WhatsApp takes no caption on audio
    assert wa.media[voice.body["audio"]["id"]].data == llm.media.speech


async def test_still_answers_after_forged_and_malformed_requests(
    gw: App, wa: FakeWhatsApp, caplog: pytest.LogCaptureFixture
) -> None:
    for raw in (b"{", b"[]", b"\x00" * 100, b'{"object": "whatsapp_business_account"}'):
        assert (await post_webhook(webhook(gw), raw)).status == 400
        forged = await post_webhook(webhook(gw), raw, headers={"X-Hub-Signature-256": ""})
        assert forged.status == 401
    await wa.customer_sends(webhook(gw), wa.text("still there?", number=ANA))
    await wa.wait_text("echo: still there?")
    assert "Traceback" not in caplog.text and "Error handling request" not in caplog.text


async def test_always_from_the_list_message(
    tmp_path: Path, llm: ScriptedLLM, wa: FakeWhatsApp, redis_url: str
) -> None:
    settings = settings_for(tmp_path, llm, wa, redis_url, access={"admins": [f"whatsapp:{ANA}"]})
    async with whatsapp_gateway(settings, wa) as gw:
        ran = add_danger_tool(gw)
        llm.push(Reply.call("danger", command="make clean"), Reply.text("first"))
        await wa.customer_sends(webhook(gw), wa.text("clean", number=ANA))
        await wa.wait_buttons()
        await eventually(lambda: len(wa.sent) >= 2, what="the list message")
        more = wa.sent[1]
        row = wa.button_press(more, "Always allow in this…", number=ANA)
        assert row["interactive"]["type"] == "list_reply"
        await wa.customer_sends(webhook(gw), row)
        await wa.wait_text("first")
        # Always: the same command later runs without asking.
        llm.push(Reply.call("danger", command="make clean"), Reply.text("again"))
        await wa.customer_sends(webhook(gw), wa.text("clean again", number=ANA))
        await wa.wait_text("again")
    assert ran == ["make clean", "make clean"]
    assert len([s for s in wa.sent if s.type == "interactive"]) == 2  # one prompt, once


def add_danger_tool(gw: App) -> list[str]:
    ran: list[str] = []

    async def run(args: _Command, ctx: ToolContext) -> str:
        ran.append(args.command)
        return f"ran {args.command}: ok"

    async def needs(args: _Command, ctx: ToolContext) -> ApprovalNeed:
        return ApprovalNeed(summary=args.command, reason="it deletes files", shape=args.command)

    gw.tools.register(ToolSpec("danger", "runs things", _Command, run, "test", needs))
    return ran
