"""The web chat (/chat) in a real headless Chromium: sign-in, a reply that arrives live, a
reply that grows in place (the post-then-edit a streamed reply makes), an approval button that
runs a real shell command, files up and back, and conversations kept across visits."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gateway.config import BrowserSettings
from gateway.messages import Outbound
from tests.fakes.llm import Reply, last_user_text, tool_results
from tests.web_kit import ALICE_TOKEN, Site, build_dir, running_site, sign_in, web_chat
from tools.browser import ChromiumMissing, find_chromium

try:
    find_chromium(BrowserSettings())
except ChromiumMissing as exc:  # tests/run.sh installs it; elsewhere say why nothing ran
    pytest.skip(f"web chat tests need Chromium and Playwright: {exc}", allow_module_level=True)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:
    async with running_site(tmp_path_factory.mktemp("chat"), browser=True) as found:
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
    """The core streams a reply by posting its first words and editing that message (for a
    platform that can edit, as the web chat declares); each state shows without a reload."""
    page = await chat_page(site)
    await page.get_by_role("button", name="New conversation").click()
    await say(page, "tell me a story")
    await page.locator(".msg.bot", has_text="echo: tell me a story").wait_for()
    conversation = page.url.split("c=")[1]
    assert await page.locator(".msg").count() == 2  # a new conversation: only these two
    web = site.app.outbox.adapter("web")
    chat = web_chat("alice", conversation)
    ref = await web.send(Outbound(chat=chat, text="Once upon"))
    message = page.locator(f"#m-{ref.message_id}")
    await message.wait_for()
    seen = [await message.inner_text()]
    for text in ("Once upon a time", "Once upon a time there was a **gateway**."):
        await web.edit(ref, Outbound(chat=chat, text=text))
        await page.wait_for_function(
            "([id, n]) => document.getElementById('m-' + id).innerText.length >= n",
            arg=[ref.message_id, len(text) - 4],
        )
        seen.append(await message.inner_text())
    assert seen[0] == "Once upon"
    assert seen[1].startswith("Once upon a time")
    assert seen[2].startswith("Once upon a time there was a gateway.")
    assert await message.locator("strong").inner_text() == "gateway"  # Markdown rendered
    assert await page.locator(".msg.bot").count() == 2  # edited, not sent again
    await page.context.close()


async def test_a_file_goes_up_and_comes_back(site: Site, tmp_path: Path) -> None:
    def responder(request: dict[str, Any]) -> Reply:
        results = tool_results(request)
        if results and results[0].startswith("saved inbox/notes.txt"):
            return Reply.call("send_file", path="inbox/notes.txt", caption="Here it is back.")
        if results:
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
