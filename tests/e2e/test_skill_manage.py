"""skill_manage through the real gateway: an admin approves, the skill is stored with its
author, and the next turn on another replica (one real redis-server) lists it in its index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_approvals import button, press, prompt_of
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import Harness, gateway_settings, running_gateway
from tools.skills.library import MARKER

SKILL = """---
name: release-notes
description: Write release notes from git history the way this team likes them
---
1. Run `git log --oneline v1..HEAD`.
2. Group the lines under Added / Fixed.
"""
ADMINS = {"admins": ["console:boss"], "rate_limit_per_minute": 0}


def manage(**arguments: str) -> Reply:
    return Reply.calls(("skill_manage", arguments))


def system_of(request: dict[str, object]) -> str:
    return str(request["messages"][0]["content"])  # type: ignore[index]


async def approve_as(gw: Harness, user: str) -> str:
    prompt = await prompt_of(gw)
    reply = await press(gw, button(prompt, "Approve once"), user=user)
    return reply.toast or ""


@pytest.mark.redis
async def test_an_approved_skill_is_in_the_next_turn_of_another_replica(
    tmp_path: Path, redis_url: str, llm: ScriptedLLM
) -> None:
    one = gateway_settings(
        tmp_path / "a", llm.url, redis_url=redis_url, access=ADMINS, scheduler={"enabled": False}
    )
    two = one.model_copy(update={"data_dir": tmp_path / "b" / "data"})
    async with running_gateway(two) as b:
        llm.push(Reply.text("hi"))
        await b.say("hello")
        assert "release-notes" not in system_of(llm.requests[-1])
        async with running_gateway(one) as a:
            llm.push(
                manage(action="create", name="release-notes", content=SKILL),
                Reply.text("Saved it as a skill."),
            )
            turn = await a.submit("remember how we write release notes, as a skill")
            prompt = await prompt_of(a)
            assert "create skill release-notes" in prompt.text
            assert "Group the lines under Added" in prompt.text
            # The requester may not approve a skill; an admin may.
            refused = await press(a, button(prompt, "Approve once"), user="alice")
            assert refused.toast == "Only an admin can decide on this."
            assert (await press(a, button(prompt, "Approve once"), user="boss")).toast == (
                "Approved."
            )
            assert (await turn.done).reply == "Saved it as a skill."
            assert tool_results(llm.requests[-1])[0].startswith("Saved skill release-notes.")
        # Replica A is gone: this turn runs on B, in the session B started before the skill.
        llm.push(Reply.text("ok"))
        await b.say("write the release notes")
        system = system_of(llm.requests[-1])
        assert "- release-notes: Write release notes from git history" in system
        mirrored = tmp_path / "b" / "data" / "skills" / "release-notes"
        assert (mirrored / "SKILL.md").read_text() == SKILL
        meta = json.loads((mirrored / MARKER).read_text())
        assert meta["author"] == "console:alice (alice)" and meta["created"] > 0


async def test_patch_write_file_and_delete_each_wait_for_an_admin(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = gateway_settings(tmp_path, llm.url, access=ADMINS)
    async with running_gateway(settings) as gw:
        skills = gw.app.settings.data_dir / "skills" / "release-notes"
        steps = [
            manage(action="create", name="release-notes", content=SKILL),
            manage(
                action="patch",
                name="release-notes",
                old_text="Added / Fixed",
                new_text="Added / Changed / Fixed",
            ),
            manage(
                action="write_file",
                name="release-notes",
                path="templates/notes.md",
                content="## Added\n",
            ),
        ]
        for step in steps:
            llm.push(step, Reply.text("done"))
            turn = await gw.submit("go on")
            assert await approve_as(gw, "boss") == "Approved."
            assert (await turn.done).reply == "done"
            gw.console.sent.clear()
        assert "Added / Changed / Fixed" in (skills / "SKILL.md").read_text()
        assert (skills / "templates" / "notes.md").read_text() == "## Added\n"
        llm.push(Reply.text("listed"))
        await gw.say("hello")
        assert "- release-notes:" in system_of(llm.requests[-1])

        llm.push(manage(action="delete", name="release-notes"), Reply.text("x"))
        turn = await gw.submit("delete it")
        prompt = await prompt_of(gw)
        assert "delete skill release-notes" in prompt.text
        await press(gw, button(prompt, "Deny"), user="boss")
        await turn.done
        assert skills.is_dir()  # denied: still there
        gw.console.sent.clear()
        llm.push(manage(action="delete", name="release-notes"), Reply.text("x"))
        turn = await gw.submit("delete it, really")
        assert await approve_as(gw, "boss") == "Approved."
        await turn.done
        assert not skills.exists()


async def test_invalid_skills_are_refused_before_anyone_is_asked(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = gateway_settings(tmp_path, llm.url, access=ADMINS)
    async with running_gateway(settings) as gw:
        llm.push(
            Reply.calls(
                ("skill_manage", {"action": "create", "name": "release-notes", "content": SKILL}),
            ),
            Reply.text("asked"),
        )
        turn = await gw.submit("save it")
        assert await approve_as(gw, "boss") == "Approved."
        await turn.done
        gw.console.sent.clear()
        bad_calls = [
            {"action": "write_file", "name": "release-notes", "path": "../../x.sh", "content": "x"},
            {
                "action": "write_file",
                "name": "release-notes",
                "path": "/etc/cron.d/x",
                "content": "x",
            },
            {"action": "create", "name": "other", "content": SKILL},  # front matter names another
            {"action": "update", "name": "git-workflow", "content": SKILL},  # bundled
            {"action": "create", "name": "big", "content": "---\nname: big\n---\nno description"},
        ]
        llm.push(
            Reply.calls(*(("skill_manage", call) for call in bad_calls)), Reply.text("refused")
        )
        assert (await gw.say("try these")).reply == "refused"
        results = tool_results(llm.requests[-1])
        assert not any(out.buttons for out in gw.console.sent)  # nobody was asked
        assert "leaves the skill's folder" in results[0]
        assert "leaves the skill's folder" in results[1]
        assert "needs `name: other`" in results[2]
        assert "bundled skill and read-only" in results[3]
        assert "needs a one-line `description:`" in results[4]
        assert not (gw.app.settings.data_dir / "x.sh").exists()
