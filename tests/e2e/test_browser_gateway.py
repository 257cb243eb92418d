"""The browser tools inside a running gateway: a person approves (or denies) a Delete click
through the approval buttons, and a password is typed only when the person wrote it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config import BrowserSettings
from tests.e2e.test_approvals import button, press, prompt_of
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.fakes.web_pages import PageSite
from tests.harness import Harness, gateway_settings, running_gateway
from tools.web.browser import ChromiumMissing, find_chromium

try:
    find_chromium(BrowserSettings())
except ChromiumMissing as exc:
    pytest.skip(f"browser tests need Chromium and Playwright: {exc}", allow_module_level=True)

pytestmark = pytest.mark.e2e


@pytest.fixture
async def site() -> AsyncIterator[PageSite]:
    async with PageSite() as server:
        yield server


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM, site: PageSite) -> AsyncIterator[Harness]:
    # The page site is on 127.0.0.1, which the guard refuses unless allowed by name.
    # These tests are about the browser's own approvals; what outside content makes ask
    # (approvals.after_untrusted) is tested in tests/e2e/test_untrusted.py.
    settings = gateway_settings(
        tmp_path,
        llm.url,
        tools={"web_allow_hosts": ["127.0.0.1"]},
        approvals={"after_untrusted": "off"},
    )
    async with running_gateway(settings) as harness:
        yield harness


async def test_a_delete_click_waits_for_a_person(
    gw: Harness, llm: ScriptedLLM, site: PageSite
) -> None:
    assert {"browser_navigate", "browser_click"} <= set(gw.app.tools.groups()["browser"])
    items = f"http://127.0.0.1:{site.port}/items"
    llm.push(
        Reply.call("browser_navigate", url=items),
        Reply.call("browser_click", ref=1),  # the "Delete" button
        Reply.text("It was not deleted."),
    )
    turn = await gw.submit("delete my items")
    prompt = await prompt_of(gw)
    assert "click button 'Delete' on 127.0.0.1:" in prompt.text
    assert f"sends the form: POST http://127.0.0.1:{site.port}/items/remove" in prompt.text
    await press(gw, button(prompt, "Deny"))
    assert (await turn.done).reply == "It was not deleted."
    assert tool_results(llm.requests[2]) == ["error: not run: denied by alice"]
    assert "POST /items/remove" not in site.hits

    gw.console.sent.clear()
    llm.push(
        Reply.call("browser_click", ref=1),
        Reply.text("Deleted."),
    )
    turn = await gw.submit("yes, really delete them")
    await press(gw, button(await prompt_of(gw), "Approve once"))
    assert (await turn.done).reply == "Deleted."
    assert "POST /items/remove" in site.hits
    assert "Clicked button 'Delete'." in tool_results(llm.requests[4])[0]


async def test_a_password_is_typed_only_when_the_person_wrote_it(
    gw: Harness, llm: ScriptedLLM, site: PageSite
) -> None:
    login = f"http://127.0.0.1:{site.port}/login"
    llm.push(
        Reply.call("browser_navigate", url=login),
        Reply.call("browser_type", ref=1, text="ana"),
        Reply.call("browser_type", ref=2, text="correct horse", submit=True),
        Reply.text("I need your password."),
    )
    assert (await gw.say("sign me in as ana")).reply == "I need your password."
    refused = tool_results(llm.requests[3])[0]
    assert refused.startswith("error: refused: a password field only takes a password")
    assert "POST /login" not in site.hits

    llm.push(
        Reply.call("browser_type", ref=2, text="correct horse", submit=True),
        Reply.call("browser_screenshot"),
        Reply.text("Signed in."),
    )
    assert (await gw.say("my password is correct horse")).reply == "Signed in."
    result = tool_results(llm.requests[5])[0]
    assert "Signed in as ana" in result and "correct horse" not in result
    # The screenshot lands in this chat's own workspace folder (tools.workspace_scope).
    shot = tool_results(llm.requests[6])[0]
    rel = shot.split(" to ", 1)[1].split(" (", 1)[0]
    assert rel.startswith("screenshots/browser-")
    saved = gw.app.settings.workspace / "console-chat1" / rel
    assert saved.read_bytes()[:4] == b"\x89PNG"


async def test_a_page_is_outside_content_and_later_changes_ask(
    tmp_path: Path, llm: ScriptedLLM, site: PageSite
) -> None:
    # approvals.after_untrusted at its default ("ask"): what the browser read is data, and
    # a change the model makes after reading it waits for a person.
    settings = gateway_settings(tmp_path, llm.url, tools={"web_allow_hosts": ["127.0.0.1"]})
    items = f"http://127.0.0.1:{site.port}/items"
    async with running_gateway(settings) as gw:
        llm.push(
            Reply.call("browser_navigate", url=items),
            Reply.call("write_file", path="items.md", content="copied from the page"),
            Reply.text("Not saved."),
        )
        turn = await gw.submit("copy the items page into items.md")
        prompt = await prompt_of(gw)
        assert "write_file" in prompt.text
        assert f"after outside content (browser_navigate {items})" in prompt.text
        await press(gw, button(prompt, "Deny"))
        assert (await turn.done).reply == "Not saved."
        page = tool_results(llm.requests[1])[0]
        assert page.startswith('<untrusted-data source="browser_navigate">')
        assert "Delete" in page and page.endswith("</untrusted-data>")
        assert tool_results(llm.requests[2]) == ["error: not run: denied by alice"]
        assert not (gw.app.settings.workspace / "console-chat1" / "items.md").exists()
