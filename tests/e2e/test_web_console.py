"""The operator console in a real headless Chromium against a running gateway: sign-in, a
wrong token, approving and denying real shell commands, pausing and resuming a job, forgetting
a conversation, an expiring session, CSRF, and sign-in links for the web chat.

One gateway, one scripted LLM and one browser serve the module; each test signs in afresh.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gateway.approvals.service import AUDIT
from gateway.config import BrowserSettings
from gateway.scheduling.jobs import JobKind
from gateway.sdk.messages import UserRef
from gateway.sessions.key import SessionKey
from tests.fakes.llm import Reply, tool_results
from tests.web_kit import (
    ADMIN_TOKEN,
    OPERATOR_TOKEN,
    Site,
    base_url,
    build_dir,
    pending_id,
    running_site,
    sign_in,
    web_chat,
    web_gateway,
    web_message,
    web_settings,
)
from tools.web.browser import ChromiumMissing, find_chromium

try:
    find_chromium(BrowserSettings())
except ChromiumMissing as exc:  # tests/run.sh installs it; elsewhere say why nothing ran
    pytest.skip(f"web console tests need Chromium and Playwright: {exc}", allow_module_level=True)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    tmp = tmp_path_factory.mktemp("console")
    # Every test signs in afresh: more than the default ten sign-ins a minute from 127.0.0.1.
    sections: dict[str, Any] = {
        "approvals": {"timeout_seconds": 60},
        "web": {"signin_attempts_per_minute": 1000},
    }
    async with running_site(tmp, browser=True, **sections) as found:
        yield found


@pytest.fixture(autouse=True)
def fresh_llm(site: Site) -> None:
    site.llm.reset()


async def admin_page(site: Site, token: str = ADMIN_TOKEN) -> Any:
    context = await site.chromium.context()
    page = await context.new_page()
    await sign_in(page, f"{site.url}/admin/login", token)
    return page


async def test_every_page_needs_sign_in_and_a_wrong_token_is_refused(site: Site) -> None:
    context = await site.chromium.context()
    page = await context.new_page()
    for path in (
        "/admin",
        "/admin/approvals",
        "/admin/scheduler/x",
        "/admin/conversations",
        "/admin/dead-letters",
    ):
        await page.goto(site.url + path)
        assert page.url == f"{site.url}/admin/login", path
        assert await page.locator("input[type=password]").count() == 1
    events = await page.request.get(f"{site.url}/admin/events?page=overview")
    assert events.status == 401
    await page.fill("input[name=token]", "not-the-token-at-all-000")
    async with page.expect_response(f"{site.url}/admin/login") as answer:
        await page.click("button[type=submit]")
    assert (await answer.value).status == 403
    assert "That token is not valid." in await page.inner_text(".error")
    await page.fill("input[name=token]", ADMIN_TOKEN)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{site.url}/admin")
    assert await page.inner_text("h1") == "Overview"
    replicas = await page.inner_text("[data-part=replicas]")
    assert site.app.instance_id in replicas and "alive" in replicas
    platforms = await page.inner_text("[data-part=adapters]")
    assert "web" in platforms and "api" in platforms
    [cookie] = [c for c in await context.cookies() if c["name"] == "chatgate_admin"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/admin"
    assert 11.9 * 3600 < cookie["expires"] - time.time() <= 12 * 3600
    # The token itself is nowhere on the page.
    assert ADMIN_TOKEN not in await page.content()
    await page.get_by_role("button", name="Sign out").click()
    await page.wait_for_url(f"{site.url}/admin/login")
    await page.goto(f"{site.url}/admin")
    assert page.url == f"{site.url}/admin/login"
    await context.close()


async def test_approve_a_shell_command_from_the_console(site: Site) -> None:
    app, llm = site.app, site.llm
    build = build_dir(app, web_chat("alice", "-"))
    page = await admin_page(site)
    await page.goto(f"{site.url}/admin/approvals")
    assert "Nothing waits for approval." in await page.inner_text("[data-part=pending]")
    llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("Cleaned up."))
    turn = await app.admission.submit(web_message("alice", "c1", "clean the build", "a1"))
    request_id = await pending_id(app)
    # The page shows the request without a reload (live update).
    request = page.locator(f"#request-{request_id}")
    await request.wait_for()
    text = await request.inner_text()
    assert "rm -rf build" in text and "web:alice" in text and "expires" in text
    assert build.exists()
    await request.get_by_role("button", name="Approve once").click()
    await page.wait_for_selector(".flash")
    assert f"{request_id}: Approved." in await page.inner_text(".flash")
    outcome = await asyncio.wait_for(turn.done, 30)
    assert outcome.reply == "Cleaned up."
    assert not build.exists()  # the command ran
    assert "[exit code 0]" in tool_results(llm.requests[-1])[0]
    # The prompt in the chat was edited as after a button press: outcome shown, buttons gone.
    web = app.outbox.adapter("web")
    messages = await web.messages.all("web:alice/c1")  # type: ignore[attr-defined]
    prompt = next(m for m in messages if "rm -rf build" in m.text)
    assert prompt.text.startswith("Approved by admin.") and prompt.buttons == []
    audit = json.loads((await app.store.list_range(AUDIT))[-1])
    assert audit["id"] == request_id and audit["outcome"] == "once" and audit["by"] == "web:admin"
    await page.goto(f"{site.url}/admin/approvals")
    assert "web:admin" in await page.inner_text("[data-part=audit]")
    await page.context.close()


async def test_deny_with_a_reason(site: Site) -> None:
    app, llm = site.app, site.llm
    build = build_dir(app, web_chat("alice", "-"))
    page = await admin_page(site, OPERATOR_TOKEN)  # an operator of their own: carol
    llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("I left it alone."))
    turn = await app.admission.submit(web_message("alice", "c1", "delete build", "d1"))
    request_id = await pending_id(app)
    await page.goto(f"{site.url}/admin/approvals")
    request = page.locator(f"#request-{request_id}")
    await request.locator("input[name=reason]").fill("release in progress")
    await request.get_by_role("button", name="Deny").click()
    await page.wait_for_selector(".flash")
    assert "Denied." in await page.inner_text(".flash")
    outcome = await asyncio.wait_for(turn.done, 30)
    assert outcome.reply == "I left it alone."
    assert build.exists()
    assert tool_results(llm.requests[-1]) == [
        "error: not run: denied by carol: release in progress"
    ]
    # The audit log, filtered to denials, shows who and why.
    await page.goto(f"{site.url}/admin/approvals?outcome=deny")
    audit = await page.inner_text("[data-part=audit] table")
    assert "web:carol" in audit and "release in progress" in audit and "once" not in audit
    await page.context.close()


async def test_pause_resume_and_run_a_job(site: Site) -> None:
    app = site.app
    alice = UserRef(platform="web", user_id="alice", display_name="alice")
    chat = web_chat("alice", "jobs")
    spec = await app.scheduler.create(
        kind=JobKind.MESSAGE,
        text="Water the plants",
        when="every day at 09:00",
        chat=chat,
        user=alice,
    )
    page = await admin_page(site)
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await page.goto(f"{site.url}/admin/scheduler")
    row = page.locator(f"#job-{spec.id}")
    assert "Water the plants" in await row.inner_text()
    await row.get_by_role("button", name="Pause").click()
    await page.wait_for_selector(".flash")
    assert f"Job {spec.id} paused." in await page.inner_text(".flash")
    assert "paused" in await page.locator(f"#job-{spec.id}").inner_text()
    assert (await app.scheduler.book.get(spec.id)).paused  # type: ignore[union-attr]
    await page.locator(f"#job-{spec.id}").get_by_role("button", name="Resume").click()
    await page.wait_for_selector(".flash")
    assert f"Job {spec.id} resumed." in await page.inner_text(".flash")
    assert not (await app.scheduler.book.get(spec.id)).paused  # type: ignore[union-attr]
    assert "in " in await page.locator(f"#job-{spec.id}").inner_text()  # its next run
    # Run now: delivered to the chat at once, and in the job's run history.
    await page.locator(f"#job-{spec.id}").get_by_role("button", name="Run now").click()
    await page.wait_for_selector(".flash")
    web = app.outbox.adapter("web")

    async def delivered() -> bool:
        messages = await web.messages.all("web:alice/jobs")  # type: ignore[attr-defined]
        return any(m.text == "Water the plants" for m in messages)

    for _ in range(200):
        if await delivered():
            break
        await asyncio.sleep(0.02)
    assert await delivered()
    await page.goto(f"{site.url}/admin/scheduler/{spec.id}")
    await page.wait_for_function("document.body.innerText.includes('delivered')")
    await page.context.close()


@pytest.mark.parametrize("with_files", [False, True])
async def test_forget_a_conversation(site: Site, with_files: bool) -> None:
    app = site.app
    user = "dave" if with_files else "gwen"
    site.llm.push(Reply.text("Noted."))
    submission = await app.admission.submit(web_message(user, "c9", "my code is 1234", "f1"))
    await submission.done
    key = SessionKey("web", user, "c9")
    assert (await app.sessions.load(key)).turns == 1
    kept = build_dir(app, web_chat(user, "c9"))  # a file in the chat's workspace
    page = await admin_page(site)
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await page.goto(f"{site.url}/admin/conversations?platform=web")
    await page.get_by_role("link", name=f"web:{user}:tc9").click()
    history = await page.inner_text("[data-part=history]")
    assert "my code is 1234" in history and "Noted." in history
    if with_files:
        await page.get_by_label("with its workspace files").check()
    await page.get_by_role("button", name="/forget").click()
    await page.wait_for_selector(".flash")
    flash = await page.inner_text(".flash")
    assert f"Forgot web:{user}" in flash
    if with_files:
        assert "Deleted 1 file(s)" in flash and not kept.exists()
    else:
        assert "Its workspace files (1 file(s), 0 KB) were kept." in flash
        assert (kept / "out.o").read_text() == "object"
    assert page.url.startswith(f"{site.url}/admin/conversations")
    assert f"web:{user}" not in await page.inner_text("[data-part=chats]")
    assert (await app.sessions.load(key)).is_new
    assert f"web:{user}" not in await app.sessions.chats()
    await page.context.close()


async def test_a_post_without_the_csrf_token_is_refused(site: Site) -> None:
    app = site.app
    alice = UserRef(platform="web", user_id="alice", display_name="alice")
    spec = await app.scheduler.create(
        kind=JobKind.MESSAGE,
        text="csrf check",
        when="every day at 10:00",
        chat=web_chat("alice", "j2"),
        user=alice,
    )
    page = await admin_page(site)
    url = f"{site.url}/admin/scheduler/{spec.id}"
    plain = await page.request.post(url, form={"action": "pause"})
    forged = await page.request.post(url, form={"action": "pause", "csrf": "guessed-value"})
    assert plain.status == 403 and forged.status == 403
    assert not (await app.scheduler.book.get(spec.id)).paused  # type: ignore[union-attr]
    # The same form with the page's own token goes through.
    await page.goto(f"{site.url}/admin/scheduler")
    csrf = await page.locator("input[name=csrf]").first.get_attribute("value")
    ok = await page.request.post(url, form={"action": "pause", "csrf": csrf or ""})
    assert ok.ok and (await app.scheduler.book.get(spec.id)).paused  # type: ignore[union-attr]
    await app.scheduler.remove(spec.id, user=alice, chat=spec.target)
    await page.context.close()


async def test_the_session_cookie_expires(site: Site, tmp_path: Path) -> None:
    settings = web_settings(tmp_path, site.llm.url, web={"session_hours": 0.0005})  # 1.8 s
    async with web_gateway(settings) as app:
        url = base_url(app)
        context = await site.chromium.context()
        page = await context.new_page()
        await sign_in(page, f"{url}/admin/login", ADMIN_TOKEN)
        assert page.url == f"{url}/admin"
        [cookie] = [c for c in await context.cookies() if c["name"] == "chatgate_admin"]
        assert cookie["expires"] - time.time() <= 2
        await asyncio.sleep(2.2)
        await page.goto(f"{url}/admin/approvals")
        assert page.url == f"{url}/admin/login"
        await context.close()


async def test_a_one_time_sign_in_link_for_the_web_chat(site: Site) -> None:
    page = await admin_page(site)
    await page.goto(f"{site.url}/admin/conversations")
    await page.fill("input[name=user]", "erin")
    await page.get_by_role("button", name="Make link").click()
    await page.wait_for_selector(".flash")
    flash = await page.inner_text(".flash")
    link = flash.split(": ", 1)[1].strip()
    assert link.startswith(f"{site.url}/chat/link/")
    guest = await (await site.chromium.context()).new_page()
    await guest.goto(link)
    assert guest.url == f"{site.url}/chat"
    assert "web:erin" in await guest.inner_text(".side-foot")
    again = await (await site.chromium.context()).new_page()
    await again.goto(link)
    assert "used already or has expired" in await again.inner_text(".error")
    await page.context.close()
    await guest.context.close()
    await again.context.close()


async def test_the_console_is_off_without_an_operator_token(site: Site, tmp_path: Path) -> None:
    settings = web_settings(tmp_path, site.llm.url, web={"admin_token": "", "operators": {}})
    async with web_gateway(settings) as app:
        assert app.console is None
        url = base_url(app)
        context = await site.chromium.context()
        for path in ("/admin", "/admin/login", "/admin/events?page=overview"):
            assert (await context.request.get(url + path)).status == 404, path
        assert (await context.request.get(f"{url}/chat/login")).ok  # the chat token still works
        await context.close()


async def test_sign_in_attempts_are_limited(site: Site, tmp_path: Path) -> None:
    settings = web_settings(tmp_path, site.llm.url, web={"signin_attempts_per_minute": 2})
    async with web_gateway(settings) as app:
        url = base_url(app)
        context = await site.chromium.context()
        page = await context.new_page()
        for _ in range(2):
            await sign_in(page, f"{url}/admin/login", "wrong-token-000000000000")
            assert "That token is not valid." in await page.inner_text(".error")
        # Past the limit even the right token waits for the next minute.
        await page.fill("input[name=token]", ADMIN_TOKEN)
        async with page.expect_response(f"{url}/admin/login") as answer:
            await page.click("button[type=submit]")
        assert (await answer.value).status == 429
        assert "Too many sign-in attempts" in await page.inner_text(".error")
        assert not [c for c in await context.cookies() if c["name"] == "chatgate_admin"]
        await context.close()


async def test_behind_a_trusted_proxy_each_client_has_its_own_limit(
    site: Site, tmp_path: Path
) -> None:
    web = {"signin_attempts_per_minute": 1, "trusted_proxies": ["127.0.0.1"]}
    settings = web_settings(tmp_path, site.llm.url, web=web)
    async with web_gateway(settings) as app:
        url = base_url(app)

        async def attempt(client: str, token: str) -> int:
            context = await site.chromium.context(extra_http_headers={"X-Forwarded-For": client})
            page = await context.new_page()
            await page.goto(f"{url}/admin/login")
            await page.fill("input[name=token]", token)
            async with page.expect_response(f"{url}/admin/login") as answer:
                await page.click("button[type=submit]")
            status: int = (await answer.value).status
            await context.close()
            return status

        assert await attempt("198.51.100.1", "wrong-token-000000000000") == 403
        assert await attempt("198.51.100.1", ADMIN_TOKEN) == 429  # this client's minute is used
        # Another client behind the same proxy is not locked out by the first.
        assert await attempt("198.51.100.2", ADMIN_TOKEN) == 303  # signed in, sent on
        # Prepending a fresh address does not give the first client a new count.
        assert await attempt("203.0.113.5, 198.51.100.1", ADMIN_TOKEN) == 429


async def test_usage_by_person_updates_while_open(site: Site) -> None:
    page = await admin_page(site)
    await page.goto(f"{site.url}/admin/usage?by=user")
    assert "web:frank" not in await page.inner_text("[data-part=usage]")
    site.llm.push(Reply.text("Counted."))
    submission = await site.app.admission.submit(web_message("frank", "u1", "count me", "u1"))
    await submission.done
    today = page.locator("[data-part=usage] .card").first
    await today.locator("tr", has_text="web:frank").wait_for()  # no reload: a live update
    row = await today.locator("tr", has_text="web:frank").inner_text()
    assert row.split("\t")[1:3] == ["10", "5"]  # the scripted server's usage
    await page.context.close()


@pytest.mark.redis
async def test_one_replicas_console_decides_a_turn_running_on_another(
    site: Site, tmp_path: Path, redis_url: str
) -> None:
    """Two replicas on one Redis: the turn waits on the first, the operator approves on the
    second's console, the command runs on the first. The console holds no state of its own."""
    prefix = f"console-{uuid.uuid4().hex[:8]}"
    shared: dict[str, Any] = {
        "approvals": {"secret": "replicas-share-this-approval-secret", "timeout_seconds": 60},
        "web": {"signin_attempts_per_minute": 1000},
    }
    first_settings, second_settings = (
        web_settings(
            tmp_path / name, site.llm.url, redis_url=redis_url, key_prefix=prefix, **shared
        )
        for name in ("a", "b")
    )
    async with web_gateway(first_settings) as first, web_gateway(second_settings) as second:
        build = build_dir(first, web_chat("alice", "-"))
        site.llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("Cleaned up."))
        turn = await first.admission.submit(web_message("alice", "r1", "clean the build", "r1"))
        request_id = await pending_id(first)
        console = base_url(second)
        page = await (await site.chromium.context()).new_page()
        await sign_in(page, f"{console}/admin/login", ADMIN_TOKEN)
        replicas = await page.inner_text("[data-part=replicas]")
        assert first.instance_id in replicas and second.instance_id in replicas
        await page.goto(f"{console}/admin/approvals")
        request = page.locator(f"#request-{request_id}")
        await request.wait_for()
        assert "rm -rf build" in await request.inner_text()
        await request.get_by_role("button", name="Approve once").click()
        await page.wait_for_selector(".flash")
        assert f"{request_id}: Approved." in await page.inner_text(".flash")
        assert (await asyncio.wait_for(turn.done, 30)).reply == "Cleaned up."
        assert not build.exists()  # it ran on the first replica
        await page.context.close()


async def test_dead_letters_are_listed_read_only(site: Site) -> None:
    from gateway.sessions.dead_letters import DeadLetter, dead_letter_write
    from gateway.store.base import Batch
    from gateway.store.inbox import InboxEntry

    entry = InboxEntry(f"dl{uuid.uuid4().hex[:8]}", json.dumps({"text": "it broke <b>me</b>"}))
    letter = DeadLetter.of("web:u9", entry, RuntimeError("the index broke"), 3)
    page = await admin_page(site)
    await page.goto(f"{site.url}/admin")
    overview = await page.inner_text("[data-part=queue]")
    await site.app.store.run(dead_letter_write(letter, Batch()))
    try:
        await page.goto(f"{site.url}/admin/dead-letters")
        row = await page.locator(f"#dead-{letter.id}").inner_text()
        assert "web:u9" in row and "RuntimeError: the index broke" in row
        assert "it broke <b>me</b>" in row  # shown as text, not markup
        assert await page.locator("[data-part=deadletters] form").count() == 0  # read-only
        await page.goto(f"{site.url}/admin")
        assert await page.inner_text("[data-part=queue]") != overview  # the count moved
    finally:
        await site.app.queue.dead_letters.drop(letter.id)
        await page.context.close()


async def test_pairing_requests_are_approved_and_grants_revoked_in_the_console(
    site: Site,
) -> None:
    app = site.app
    stranger = UserRef(platform="web", user_id="sam", display_name="Sam")
    record, new = await app.pairing.book.issue(stranger, web_chat("sam", "-"))
    assert new
    page = await admin_page(site)
    await page.goto(f"{site.url}/admin/access")
    request = page.locator(f"#pairing-{record.code}")
    assert "web:sam" in await request.inner_text()
    await request.get_by_role("button", name="Approve").click()
    await page.wait_for_selector(".flash")
    assert "Approved: Sam (web:sam)" in await page.inner_text(".flash")
    grant = await app.pairing.book.granted(stranger)
    assert grant is not None and grant.by == "web:admin"
    row = page.locator("[id='grant-web:sam']")
    await row.get_by_role("button", name="Revoke").click()
    await page.wait_for_selector(".flash")
    assert "Revoked: web:sam" in await page.inner_text(".flash")
    assert await app.pairing.book.granted(stranger) is None
    assert "Nobody was let in by pairing." in await page.inner_text("[data-part=pairing]")
    await page.context.close()
