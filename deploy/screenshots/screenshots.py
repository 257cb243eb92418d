"""Screenshots of the operator console and the web chat for the README (docs/*.png).

Runs a real gateway with a scripted LLM, puts a conversation, a pending approval, scheduled
jobs and a warning into it, and photographs each page in headless Chromium:

    .venv/bin/python docs/screenshots.py
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.scheduling.jobs import JobKind  # noqa: E402
from gateway.sdk.messages import ChatKind, ChatRef, UserRef  # noqa: E402
from gateway.web.transcript import ChatMessage, new_id  # noqa: E402
from tests.fakes.llm import Reply, ScriptedLLM  # noqa: E402
from tests.web_kit import (  # noqa: E402
    ADMIN_TOKEN,
    ALICE_TOKEN,
    base_url,
    chromium,
    sign_in,
    web_gateway,
    web_message,
    web_settings,
)

OUT = ROOT / "docs"
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}


async def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        async with ScriptedLLM() as llm:
            settings = web_settings(Path(tmp), llm.url, access={"admins": ["telegram:42"]})
            async with web_gateway(settings) as app, chromium() as browser:
                url = base_url(app)
                await _populate(app, llm)
                admin = await browser.context(viewport=DESKTOP)
                page = await admin.new_page()
                await sign_in(page, f"{url}/admin/login", ADMIN_TOKEN)
                for name, path in (
                    ("overview", "/admin"),
                    ("approvals", "/admin/approvals"),
                    ("scheduler", "/admin/scheduler"),
                    ("conversations", "/admin/conversations"),
                    ("conversation", "/admin/conversations/web%3Aalice%3Atdemo"),
                    ("usage", "/admin/usage?by=chat"),
                    ("tools", "/admin/tools"),
                ):
                    await page.goto(url + path)
                    await page.wait_for_timeout(300)
                    await page.screenshot(path=str(OUT / f"console-{name}.png"), full_page=False)
                phone = await browser.context(viewport=PHONE, is_mobile=True)
                mobile = await phone.new_page()
                await sign_in(mobile, f"{url}/admin/login", ADMIN_TOKEN)
                await mobile.goto(f"{url}/admin/approvals")
                await mobile.screenshot(path=str(OUT / "console-phone.png"))
                chat = await (await browser.context(viewport=DESKTOP)).new_page()
                await sign_in(chat, f"{url}/chat/login", ALICE_TOKEN)
                await chat.goto(f"{url}/chat?c=demo")
                await chat.wait_for_selector(".msg.bot")
                await chat.screenshot(path=str(OUT / "web-chat.png"))
    print("wrote", ", ".join(sorted(p.name for p in OUT.glob("*.png"))))


async def _populate(app: object, llm: ScriptedLLM) -> None:
    from gateway.app.app import App

    assert isinstance(app, App)
    web = app.outbox.adapter("web")
    conversations = web.conversations  # type: ignore[attr-defined]
    await conversations.ensure("alice", "ops", "Clean-ups")
    await conversations.ensure("alice", "demo", "Disk space on the build box")
    operator = UserRef(platform="web", user_id="admin", display_name="admin")
    for command, then, choice, reason in (
        ("rm -rf cache", "Removed `cache/`.", "once", ""),
        ("git push --force origin main", "OK, I did not push.", "deny", "never force-push main"),
    ):
        llm.push(Reply.call("shell", command=command), Reply.text(then))
        turn = await app.admission.submit(web_message("alice", "ops", f"please {command}", command))
        for _ in range(100):
            if requests := await app.approvals.pending_requests():
                await app.approvals.decide_as_operator(requests[0].id, operator, choice, reason)  # type: ignore[arg-type]
                break
            await asyncio.sleep(0.05)
        await turn.done
    llm.push(
        Reply.text(
            "The build box has **12 GB** free. The biggest folder is `build/` (9.1 GB):\n\n"
            "| folder | size |\n|---|---|\n| build/ | 9.1 GB |\n| cache/ | 1.2 GB |"
        ),
        Reply.call("shell", command="rm -rf build"),
    )

    async def say(text: str) -> object:
        # As the chat page does: the person's message is shown, then handed to the gateway.
        mine = ChatMessage(id=new_id(), role="user", text=text, markdown=False, ts=time.time())
        await web.record("alice", "demo", mine)  # type: ignore[attr-defined]
        return (await app.admission.submit(web_message("alice", "demo", text, text))).done

    await (await say("How much disk space is left?"))  # type: ignore[misc]
    await say("Delete the build folder")
    for _ in range(100):
        if await app.approvals.pending_requests():
            break
        await asyncio.sleep(0.05)
    alice = UserRef(platform="web", user_id="alice", display_name="alice")
    where = ChatRef(platform="web", chat_id="alice", thread_id="demo", kind=ChatKind.DIRECT)
    await app.scheduler.create(
        kind=JobKind.AGENT,
        text="Summarise yesterday's failed builds",
        when="every day at 07:30",
        chat=where,
        user=alice,
        timezone="Europe/Berlin",
    )
    job = await app.scheduler.create(
        kind=JobKind.MESSAGE,
        text="Stand-up in 5 minutes",
        when="every weekday at 09:55",
        chat=where,
        user=alice,
    )
    await app.scheduler.pause(job.id, user=alice, chat=where)
    logging.getLogger("adapters.telegram").warning(
        "telegram send failed chat=-1001234 error=Forbidden: bot was kicked from the group"
    )
    await asyncio.sleep(2.5)  # the warning reaches the store


if __name__ == "__main__":
    asyncio.run(main())
