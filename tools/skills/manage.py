"""skill_manage: the agent turns an approach that worked into a reusable skill, or improves
one it wrote earlier. Changes are validated before anyone is asked, then wait for an admin's
Approve (`skills.manage_approval`, on by default); bundled and local skills are read-only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from gateway.sdk import ApprovalNeed, ToolContext, ToolError, ToolFamily, ToolSpec
from tools.args import ToolArgs
from tools.skills.library import GROUP, SHARED, SKILL_FILE, SkillLibrary
from tools.skills.store import SkillInvalid, SkillStore, check_path, digest_of, validate

_SHOWN = 1500  # characters of new content shown to the approver


class SkillManageArgs(ToolArgs):
    action: Literal["create", "update", "patch", "delete", "write_file"] = Field(
        description=(
            "create/update: the whole SKILL.md in content; patch: replace old_text with "
            "new_text in a file; write_file: add or replace a supporting file; delete."
        )
    )
    name: str = Field(description="Skill name: lowercase letters, digits and '-'.")
    content: str = Field(
        default="",
        description=(
            "create/update: SKILL.md, starting with front matter '---\\nname: <name>\\n"
            "description: <one line>\\n---' then the instructions; write_file: the file's text."
        ),
    )
    path: str = Field(default="", description="write_file/patch: a path inside the skill.")
    old_text: str = Field(default="", description="patch: the exact text to replace.")
    new_text: str = Field(default="", description="patch: the replacement.")


@dataclass(frozen=True)
class Change:
    """What a call would do, worked out (and validated) before approval and again after."""

    name: str
    files: dict[str, str] | None  # None: delete
    summary: str


class SkillManageTools(ToolFamily):
    """skill_manage on the shared skills in `skills` (the store); `library` tells which names
    are bundled or local and so read-only. With `approval`, each change waits for an admin."""

    name = "skill_manage"

    def __init__(
        self,
        skills: SkillStore,
        library: SkillLibrary,
        *,
        approval: bool,
        admins: Sequence[str],
    ) -> None:
        self.skills = skills
        self.library = library
        self.approval = approval
        self.admins = admins

    async def plan(self, args: SkillManageArgs) -> Change:
        name = args.name.strip()
        known = self.library.get(name)
        if known is not None and known.source != SHARED:
            raise ToolError(
                f"{name} is a {known.source} skill and read-only; create a new skill with "
                "another name instead."
            )
        found = await self.skills.files(name)
        try:
            return _change(args, name, found[1] if found else None, self.skills)
        except SkillInvalid as exc:
            raise ToolError(str(exc)) from None

    async def needs_approval(self, args: SkillManageArgs, ctx: ToolContext) -> ApprovalNeed | None:
        change = await self.plan(args)  # an invalid change is refused before anyone is asked
        if not self.approval:
            return None
        if not self.admins:
            raise ToolError(
                "skill changes need an admin's approval and no admin is configured "
                "(access.admins); tell the person, or an operator can set "
                "skills.manage_approval = false."
            )
        shape = f"skill:{change.name}:{digest_of(change.files) if change.files else 'delete'}"
        return ApprovalNeed(
            summary=change.summary,
            reason=f"the agent wants to {args.action} the shared skill {change.name!r}",
            shape=shape,
            admins_only=True,
        )

    async def skill_manage(self, args: SkillManageArgs, ctx: ToolContext) -> str:
        change = await self.plan(args)
        if change.files is None:
            await self.skills.delete(change.name)
            verb = "Deleted"
        else:
            author = f"{ctx.user.address} ({ctx.user.label})"
            try:
                await self.skills.put(change.name, change.files, author=author)
            except SkillInvalid as exc:
                raise ToolError(str(exc)) from None
            verb = "Saved"
        if await self.skills.sync():
            self.library.reload()
        return f"{verb} skill {change.name}. It is in the skills index from the next turn on."

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="skill_manage",
                description=(
                    "Write reusable skills: after solving a task with an approach worth repeating, "
                    "save it as a skill (create), improve one (update, patch), add a supporting "
                    "file (write_file) or delete one. Only skills written this way can be changed."
                ),
                args=SkillManageArgs,
                handler=self.skill_manage,
                group=GROUP,
                approval=self.needs_approval,
            )
        ]


def _change(
    args: SkillManageArgs, name: str, current: dict[str, str] | None, skills: SkillStore
) -> Change:
    action = args.action
    if action == "create" and current is not None:
        raise SkillInvalid(f"skill {name} exists; use update or patch.")
    if action != "create" and current is None:
        raise SkillInvalid(f"there is no shared skill named {name!r}; create it first.")
    if action == "delete":
        return Change(name, None, f"delete skill {name} ({len(current or {})} files)")
    files = dict(current or {})
    if action in ("create", "update"):
        files[SKILL_FILE] = args.content
        shown = args.content
        summary = f"{action} skill {name}: {SKILL_FILE} ({len(args.content):,} characters)"
    elif action == "write_file":
        path = check_path(args.path)
        if path == SKILL_FILE:
            raise SkillInvalid(f"use update or patch to change {SKILL_FILE}.")
        files[path] = args.content
        shown = args.content
        summary = f"write {path} in skill {name} ({len(args.content):,} characters)"
    else:
        path = check_path(args.path or SKILL_FILE)
        text = files.get(path)
        if text is None:
            raise SkillInvalid(f"{path} is not a file of skill {name}: {sorted(files)}.")
        if not args.old_text or text.count(args.old_text) != 1:
            raise SkillInvalid("old_text must occur exactly once in the file; quote more of it.")
        files[path] = text.replace(args.old_text, args.new_text)
        shown = f"- {args.old_text}\n+ {args.new_text}"
        summary = f"patch {path} in skill {name}"
    validate(name, files, skills.limits)
    clipped = shown if len(shown) <= _SHOWN else shown[:_SHOWN] + "\n[…]"
    return Change(name, files, f"{summary}\n---\n{clipped}")
