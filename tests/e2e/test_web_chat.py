"""The web chat (/chat) in a real headless Chromium: sign-in, a reply that arrives live, a
reply that grows in place (the post-then-edit a streamed reply makes), an approval button that
runs a real shell command, files up and back, and conversations kept across visits."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gateway.config import BrowserSettings
from gateway.intake.access import NOT_ALLOWED
from tests.fakes.llm import Reply, last_user_text, tool_results
from tests.web_kit import ALICE_TOKEN, Site, build_dir, running_site, sign_in, web_chat
from tools.web.browser import ChromiumMissing, find_chromium

try:
    find_chromium(BrowserSettings())
except ChromiumMissing as exc:  # tests/run.sh installs it; elsewhere say why nothing ran
    pytest.skip(f"web chat tests need Chromium and Playwright: {exc}", allow_module_level=True)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

MALLORY_TOKEN = "mallory-chat-token-blocked-777"  # signs in, but access blocks web:mallory


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    tmp = tmp_path_factory.mktemp("chat")
    sections: dict[str, Any] = {
        "llm": {"stream": True},
        "web": {
            "signin_attempts_per_minute": 1000,  # every test signs in afresh
            "chat_tokens": {ALICE_TOKEN: "alice", MALLORY_TOKEN: "mallory"},
        },
        "access": {"blocked_users": ["web:mallory"], "rate_limit_per_minute": 0},
    }
    async with running_site(tmp, browser=True, **sections) as found:
        yield found


@pytest.fixture(autouse=True)
def fresh_llm(site: Site) -> None:
    site.llm.reset()


async def chat_page(site: Site) -> Any:
    page = await (await site.chromium.context()).new_page()
    await sign_in(page, f"{site.url}/chat/login", ALICE_TOKEN)
    assert page.url.startswith(f"{site.url}/chat")
    return page


async def say(page: Any, text: str) -> None:
    await page.fill("#text", text)
    await page.press("#text", "Enter")


async def test_a_reply_arrives_live_and_an_approval_button_decides(site: Site) -> None:
    app, llm = site.app, site.llm
    page = await chat_page(site)
    await say(page, "hello there")
    await page.locator(".msg.bot", has_text="echo: hello there").wait_for()
    assert await page.locator(".msg.user").inner_text() == "hello there"
    # A real shell command that needs approval: the prompt comes with its buttons.
    build = build_dir(app, web_chat("alice", "-"))
    llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("Build folder removed."))
    await say(page, "remove the build folder")
    prompt = page.locator(".msg.bot", has_text="Approval needed")
    await prompt.wait_for()
    assert "rm -rf build" in await prompt.inner_text()
    assert build.exists()
    await prompt.get_by_role("button", name="Approve once").click()
    await page.locator("#toast", has_text="Approved.").wait_for()
    # The prompt is edited in place, its buttons gone; then the answer arrives.
    await page.locator(".msg.bot", has_text="Approved by alice").wait_for()
    await page.locator(".msg.bot", has_text="Build folder removed.").wait_for()
    assert await page.locator(".msg.bot button").count() == 0
    assert not build.exists()
    assert "[exit code 0]" in tool_results(llm.requests[-1])[0]
    # The conversation is there on the next visit, in the sidebar and in full.
    conversation = page.url.split("c=")[1]
    again = await chat_page(site)
    await again.goto(f"{site.url}/chat?c={conversation}")
    await again.locator(".msg.bot", has_text="Build folder removed.").wait_for()
    assert await again.locator(f"#conversations a[data-id='{conversation}']").count() == 1
    await page.context.close()
    await again.context.close()


async def test_a_streamed_reply_grows_in_place(site: Site) -> None:
    """The model's reply streams: the core posts its first words and edits that message as it
    grows (the web chat declares edits); the browser shows each state as it comes."""
    site.llm.push(
        Reply.streamed("Once upon a time there was a **gateway** that talked.", chunks=4, delay=0.6)
    )
    page = await chat_page(site)
    await page.get_by_role("button", name="New conversation").click()
    await page.evaluate(
        """() => {
            window.states = [];
            new MutationObserver(() => {
                const bot = document.querySelector('.msg.bot');
                if (bot && bot.innerText !== window.states[window.states.length - 1])
                    window.states.push(bot.innerText);
            }).observe(document.getElementById('messages'),
                       {childList: true, subtree: true, characterData: true});
        }"""
    )
    await say(page, "tell me a story")
    final = page.locator(".msg.bot", has_text="that talked.")
    await final.wait_for()
    states = [s for s in await page.evaluate("window.states") if s]
    assert len(states) >= 3, states  # it grew in place, more than once
    assert all(state.startswith("Once upon a") for state in states)
    assert [len(s) for s in states] == sorted({len(s) for s in states})  # only ever grew
    assert states[-1].startswith("Once upon a time there was a gateway that talked.")
    assert await final.locator("strong").inner_text() == "gateway"  # Markdown rendered
    assert await page.locator(".msg.bot").count() == 1  # edited, never sent twice
    record = site.llm.requests[-1]
    assert record["stream"] is True
    await page.context.close()


async def test_a_file_goes_up_and_comes_back(site: Site, tmp_path: Path) -> None:
    def responder(request: dict[str, Any]) -> Reply:
        results = tool_results(request)
        if results and results[0].startswith("saved "):  # "saved <path> (...)"
            return Reply.call("send_file", path=results[0].split()[1], caption="Here it is back.")
        if results:
            # Naming a file someone sent marks the turn, so the result comes marked as data.
            assert "\nsent attachments/inbox/notes.txt " in results[0], results
            return Reply.text("Sent.")
        found = re.search(r"file_id=(\S+)\]", last_user_text(request))
        assert found is not None, "the upload is named to the model with its file_id"
        return Reply.call("save_attachment", file_id=found.group(1), path="inbox/notes.txt")

    site.llm.reset(responder)
    upload = tmp_path / "notes.txt"
    upload.write_text("line one\nline two\n")
    page = await chat_page(site)
    await page.set_input_files("#files", str(upload))
    await say(page, "keep this file and send it back")
    mine = page.locator(".msg.user", has_text="keep this file")
    await mine.wait_for()
    assert "notes.txt" in await mine.inner_text()
    back = page.locator(".msg.bot", has_text="Here it is back.")
    await back.wait_for()
    link = back.locator("a[download]")
    assert (await link.inner_text()).startswith("notes.txt")
    href = await link.get_attribute("href")
    response = await page.request.get(f"{site.url}{href}")
    assert response.ok and await response.body() == upload.read_bytes()
    assert "attachment" in response.headers["content-disposition"]
    await page.locator(".msg.bot", has_text="Sent.").wait_for()
    # Another person cannot fetch alice's file.
    other = await (await site.chromium.context()).new_page()
    refused = await other.request.get(f"{site.url}{href}")
    assert refused.status == 401
    await page.context.close()
    await other.context.close()


def stored_files(site: Site) -> int:
    with sqlite3.connect(site.app.settings.data_dir / "chatgate.db") as db:
        (count,) = db.execute("SELECT count(*) FROM keys WHERE key LIKE 'web_file:%'").fetchone()
    return int(count)


async def test_files_from_someone_not_allowed_are_not_kept(site: Site, tmp_path: Path) -> None:
    before = stored_files(site)
    upload = tmp_path / "payload.txt"
    upload.write_text("x" * 1000)
    page = await (await site.chromium.context()).new_page()
    await sign_in(page, f"{site.url}/chat/login", MALLORY_TOKEN)
    await page.set_input_files("#files", str(upload))
    await say(page, "keep this")
    toast = page.locator("#toast")
    await toast.wait_for()
    assert await toast.inner_text() == NOT_ALLOWED
    assert stored_files(site) == before and site.llm.requests == []
    await page.context.close()


async def test_sign_in_wrong_token_and_calls_without_the_csrf_token(site: Site) -> None:
    page = await (await site.chromium.context()).new_page()
    await page.goto(f"{site.url}/chat")
    assert page.url == f"{site.url}/chat/login"
    await page.fill("input[name=token]", "wrong-token-0000000000")
    await page.click("button[type=submit]")
    assert "That token is not valid." in await page.inner_text(".error")
    await sign_in(page, f"{site.url}/chat/login", ALICE_TOKEN)
    sent = await page.request.post(f"{site.url}/chat/send", multipart={"text": "sneaky"})
    pressed = await page.request.post(
        f"{site.url}/chat/press", data={"conversation": "x", "message": "y", "data": "ap:1:once"}
    )
    assert sent.status == 403 and pressed.status == 403
    await asyncio.sleep(0.2)
    assert all(r.get("messages", [{}])[-1].get("content") != "sneaky" for r in site.llm.requests)
    # Signing out ends the session: the page sends the user back to sign in.
    await page.goto(f"{site.url}/chat")
    await page.get_by_role("button", name="Sign out").click()
    await page.wait_for_url(f"{site.url}/chat/login")
    await page.goto(f"{site.url}/chat")
    assert page.url == f"{site.url}/chat/login"
    await page.context.close()


async def test_a_question_with_choices_is_answered_by_a_press(site: Site) -> None:
    site.llm.push(
        Reply.call("clarify", question="Which colour?", choices=["red", "blue"]),
        Reply.text("Blue it is."),
    )
    page = await chat_page(site)
    await page.get_by_role("button", name="New conversation").click()
    await say(page, "paint the fence")
    question = page.locator(".msg.bot", has_text="Which colour?")
    await question.wait_for()
    await question.get_by_role("button", name="blue").click()
    await page.locator(".msg.bot", has_text="Blue it is.").wait_for()
    assert tool_results(site.llm.requests[-1]) == ["alice answered: blue"]
    await page.context.close()
