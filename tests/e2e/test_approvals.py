"""Approvals end to end through the router and agent: prompts, presses, commands, timeouts,
refusals and orphaned requests. Platform rendering is covered in each adapter's tests."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from gateway.approvals.service import AUDIT
from gateway.sdk.messages import ButtonPress, InboundKind, Outbound, PressReply, UserRef
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolSpec
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import Harness, gateway_settings, running_gateway


class _Cmd(BaseModel):
    command: str


def add_danger_tool(gw: Harness) -> list[str]:
    """A tool that always needs approval and records what it actually ran."""
    ran: list[str] = []

    async def handler(args: _Cmd, ctx: ToolContext) -> str:
        ran.append(args.command)
        return f"ran {args.command}: ok"

    async def approval(args: _Cmd, ctx: ToolContext) -> ApprovalNeed:
        return ApprovalNeed(
            summary=args.command, reason="it deletes files", shape=args.command, cwd="."
        )

    gw.app.tools.register(ToolSpec("danger", "runs things", _Cmd, handler, "test", approval))
    return ran


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM) -> AsyncIterator[Harness]:
    settings = gateway_settings(
        tmp_path, llm.url, access={"admins": ["console:boss"], "rate_limit_per_minute": 0}
    )
    async with running_gateway(settings) as harness:
        yield harness


async def prompt_of(gw: Harness, wait: float = 5) -> Outbound:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        for out in gw.console.sent:
            if out.buttons:
                return out
        await asyncio.sleep(0.02)
    raise AssertionError(f"no approval prompt was sent; sent: {gw.texts}")


def button(prompt: Outbound, label: str) -> str:
    return next(b.data for row in prompt.buttons for b in row if b.label == label)


async def press(gw: Harness, data: str, user: str = "alice", chat: str = "chat1") -> PressReply:
    return await gw.app.extensions.press(
        ButtonPress(
            event_id=f"p-{time.monotonic_ns()}",
            chat=gw.console.chat.model_copy(update={"chat_id": chat}),
            user=UserRef(platform="console", user_id=user, display_name=user),
            data=data,
        )
    )


async def test_approve_runs_and_output_reaches_model(gw: Harness, llm: ScriptedLLM) -> None:
    ran = add_danger_tool(gw)
    llm.push(Reply.call("danger", command="rm -rf build"), Reply.text("Deleted build/."))
    turn = await gw.submit("clean the build")
    prompt = await prompt_of(gw)
    assert "rm -rf build" in prompt.text and "it deletes files" in prompt.text
    assert "/approve" in prompt.text
    assert ran == []
    reply = await press(gw, button(prompt, "Approve once"))
    assert reply.toast == "Approved." and reply.edit_text is not None
    assert "approved by alice" in reply.edit_text.lower()
    outcome = await turn.done
    assert outcome.reply == "Deleted build/."
    assert ran == ["rm -rf build"]
    assert tool_results(llm.requests[1]) == ["ran rm -rf build: ok"]
    audit = [json.loads(e) for e in await gw.app.store.list_range(AUDIT)]
    assert audit[-1]["outcome"] == "once" and audit[-1]["by"] == "console:alice"


async def test_deny_with_reason_tells_the_model(gw: Harness, llm: ScriptedLLM) -> None:
    ran = add_danger_tool(gw)
    llm.push(Reply.call("danger", command="rm -rf data"), Reply.text("OK, I left it."))
    turn = await gw.submit("delete data")
    prompt = await prompt_of(gw)
    request_id = button(prompt, "Deny").split(":")[1]
    answer = await gw.say(f"/deny {request_id} we still need it")
    assert answer.reply == "Denied."
    assert (await turn.done).reply == "OK, I left it."
    assert ran == []
    result = tool_results(llm.requests[1])[0]
    assert result == "error: not run: denied by alice: we still need it"
    # The prompt message itself was edited to show the outcome.
    assert any("Denied by alice" in out.text for _, out in gw.console.edits)


async def test_timeout_is_a_deny(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, approvals={"timeout_seconds": 0.5})
    async with running_gateway(settings) as gw:
        ran = add_danger_tool(gw)
        llm.push(Reply.call("danger", command="shutdown now"), Reply.text("Nobody answered."))
        outcome = await gw.say("shut it down")
        assert outcome.reply == "Nobody answered."
        assert ran == []
        assert "expired, not run" in tool_results(llm.requests[1])[0]
        assert any("Expired, not run" in out.text for _, out in gw.console.edits)
        prompt = await prompt_of(gw)
        late = await press(gw, button(prompt, "Approve once"))
        assert late.alert and "Already decided: expired" in late.toast


async def test_other_user_refused_then_double_press_one_decision(
    gw: Harness, llm: ScriptedLLM
) -> None:
    ran = add_danger_tool(gw)
    llm.push(Reply.call("danger", command="rm -rf tmp"), Reply.text("done"))
    turn = await gw.submit("clean tmp")
    prompt = await prompt_of(gw)
    approve = button(prompt, "Approve once")
    refused = await press(gw, approve, user="mallory")
    assert refused.alert and refused.toast == "Only alice or an admin can decide on this."
    assert ran == []
    first, second = await asyncio.gather(press(gw, approve), press(gw, button(prompt, "Deny")))
    assert sorted([first.alert, second.alert]) == [False, True]
    loser = first if first.alert else second
    assert loser.toast.startswith("Already decided")
    await turn.done
    approve_won = not first.alert
    assert ran == (["rm -rf tmp"] if approve_won else [])
    decisions = [json.loads(e) for e in await gw.app.store.list_range(AUDIT)]
    assert len(decisions) == 1


async def test_admin_may_approve_forged_and_foreign_ids_refused(
    gw: Harness, llm: ScriptedLLM
) -> None:
    ran = add_danger_tool(gw)
    llm.push(Reply.call("danger", command="git push --force"), Reply.text("pushed"))
    turn = await gw.submit("force push")
    prompt = await prompt_of(gw)
    forged = await press(gw, "ap:deadbeef00:once")
    assert forged.alert and "unknown or has expired" in forged.toast
    bad_choice = await press(gw, button(prompt, "Approve once").replace(":once", ":always"))
    assert bad_choice.alert
    other_chat = await press(gw, button(prompt, "Approve once"), chat="elsewhere")
    assert other_chat.alert and "another chat" in other_chat.toast
    assert ran == []
    admin = await press(gw, button(prompt, "Approve once"), user="boss")
    assert admin.toast == "Approved."
    assert (await turn.done).reply == "pushed" and ran == ["git push --force"]


async def test_approve_for_session_skips_the_second_prompt(gw: Harness, llm: ScriptedLLM) -> None:
    ran = add_danger_tool(gw)
    llm.push(
        Reply.call("danger", command="make clean"),
        Reply.text("first"),
        Reply.call("danger", command="make clean"),
        Reply.text("second"),
    )
    turn = await gw.submit("clean")
    await press(gw, button(await prompt_of(gw), "Approve for session"))
    assert (await turn.done).reply == "first"
    prompts_before = sum(1 for out in gw.console.sent if out.buttons)
    assert (await gw.say("clean again")).reply == "second"
    assert sum(1 for out in gw.console.sent if out.buttons) == prompts_before
    assert ran == ["make clean", "make clean"]
    await gw.say("/new")
    llm.push(Reply.call("danger", command="make clean"), Reply.text("third"))
    turn = await gw.submit("clean once more")
    await prompt_of_count(gw, prompts_before + 1)
    await gw.app.queue.stop_session(turn.session)  # type: ignore[arg-type]


async def prompt_of_count(gw: Harness, n: int) -> None:
    for _ in range(250):
        if sum(1 for out in gw.console.sent if out.buttons) >= n:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("a new session should ask again")


async def test_model_and_scheduled_turns_cannot_approve(gw: Harness, llm: ScriptedLLM) -> None:
    ran = add_danger_tool(gw)
    llm.push(Reply.call("danger", command="rm -rf x"))
    turn = await gw.submit("do it")
    prompt = await prompt_of(gw)
    request_id = button(prompt, "Deny").split(":")[1]
    # A synthetic turn (what the scheduler submits) whose text looks like the command.
    synthetic = gw.console.inbound(f"/approve {request_id}").model_copy(
        update={"kind": InboundKind.AGENT}
    )
    llm.push(Reply.text("I am not a command"))
    sub = await gw.app.admission.submit(synthetic)
    assert sub.status.value != "command"
    bot = await gw.app.extensions.press(
        ButtonPress(
            event_id="b",
            chat=gw.console.chat,
            data=button(prompt, "Approve once"),
            user=UserRef(platform="console", user_id="alice", is_bot=True),
        )
    )
    assert bot.alert
    assert await gw.app.approvals._answers.current(request_id) is None
    assert ran == []
    await gw.app.queue.stop_session(turn.session)  # type: ignore[arg-type]


async def test_stop_while_waiting_expires_the_request(gw: Harness, llm: ScriptedLLM) -> None:
    ran = add_danger_tool(gw)
    llm.push(Reply.call("danger", command="rm -rf cache"))
    turn = await gw.submit("clear cache")
    prompt = await prompt_of(gw)
    await gw.say("/stop")
    assert (await turn.done).cancelled
    late = await press(gw, button(prompt, "Approve once"))
    assert late.alert and "expired" in late.toast
    assert ran == []


async def test_orphan_from_dead_process_is_expired_with_notice(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = gateway_settings(tmp_path, llm.url)
    async with running_gateway(settings) as gw:
        ran = add_danger_tool(gw)
        llm.push(Reply.call("danger", command="dd if=/dev/zero of=disk.img"))
        turn = await gw.submit("make a disk")
        prompt = await prompt_of(gw)
        request_id = button(prompt, "Deny").split(":")[1]
        # Pretend a process that died made this request: change its owner (and seal it
        # with the gateway's key, as that process would have).
        key = f"approval:{request_id}"
        raw = gw.app.signer.open("approval request", key, await gw.app.store.get(key))
        raw["owner"] = "dead-process"
        await gw.app.store.set(key, gw.app.signer.seal("approval request", key, raw))
        assert await gw.app.approvals.sweep_once() == 1
        assert any("gateway restarted" in out.text for _, out in gw.console.edits)
        outcome = await turn.done
        assert ran == []
        assert "expired" in (outcome.reply or "") or "expired" in tool_results(llm.requests[-1])[0]


async def test_approvals_log_cli(
    tmp_path: Path,
    llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = gateway_settings(tmp_path, llm.url)
    async with running_gateway(settings) as gw:
        add_danger_tool(gw)
        llm.push(Reply.call("danger", command="rm -rf old"), Reply.text("ok"))
        turn = await gw.submit("tidy")
        request_id = button(await prompt_of(gw), "Deny").split(":")[1]
        await gw.say(f"/deny {request_id} keep it")
        await turn.done
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(settings.data_dir))
    from gateway.app.cli import main

    assert await asyncio.to_thread(main, ["approvals", "log"]) == 0
    out = capsys.readouterr().out
    assert request_id in out and "deny" in out and "console:alice" in out
    assert "rm -rf old  (keep it)" in out


async def test_write_file_overwrite_needs_approval_when_configured(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = gateway_settings(tmp_path, llm.url, tools={"confirm_overwrite": True})
    async with running_gateway(settings) as gw:
        chat_files = gw.app.settings.workspace / "console-chat1"  # this chat's workspace
        target = chat_files / "report.md"
        llm.push(
            Reply.call("write_file", path="new.md", content="fresh"),  # new file: no prompt
            Reply.call("write_file", path="report.md", content="replaced"),
            Reply.text("done"),
        )
        chat_files.mkdir()
        target.write_text("keep me")
        turn = await gw.submit("write both")
        prompt = await prompt_of(gw)
        assert "overwrite report.md (7 bytes)" in prompt.text
        assert (chat_files / "new.md").read_text() == "fresh"
        await press(gw, button(prompt, "Deny"))
        assert (await turn.done).reply == "done"
        assert target.read_text() == "keep me"
        assert "not run: denied by alice" in tool_results(llm.requests[2])[0]


async def test_always_survives_a_restart_and_is_offered_only_as_configured(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    """Issue 15: "always" persists (the key that seals it is kept in the data directory);
    `approvals.allow_always` says who may grant it, and "off" offers no such button."""
    settings = gateway_settings(tmp_path, llm.url, approvals={"allow_always": "requester"})
    async with running_gateway(settings) as gw:
        ran = add_danger_tool(gw)
        llm.push(Reply.call("danger", command="make clean"), Reply.text("first"))
        turn = await gw.submit("clean")
        reply = await press(gw, button(await prompt_of(gw), "Always allow in this chat"))
        assert reply.toast == "Approved."
        assert (await turn.done).reply == "first"
    async with running_gateway(settings) as gw:
        ran = add_danger_tool(gw)
        llm.push(Reply.call("danger", command="make clean"), Reply.text("again"))
        assert (await gw.say("clean again")).reply == "again"
        assert ran == ["make clean"] and not any(out.buttons for out in gw.console.sent)
    off = settings.model_copy(
        update={"approvals": settings.approvals.model_copy(update={"allow_always": "off"})}
    )
    async with running_gateway(off) as gw:
        add_danger_tool(gw)
        llm.push(Reply.call("danger", command="make dist"), Reply.text("no"))
        turn = await gw.submit("dist")
        prompt = await prompt_of(gw)
        labels = {b.label for row in prompt.buttons for b in row}
        assert labels == {"Approve once", "Approve for session", "Deny"}
        forged_press = await press(gw, button(prompt, "Deny").replace(":deny", ":always"))
        assert forged_press.alert and forged_press.toast == "This button is not valid."
        await press(gw, button(prompt, "Deny"))
        await turn.done
