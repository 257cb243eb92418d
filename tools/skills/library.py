"""Skills: SKILL.md instruction packs the agent loads when a task calls for them.

Progressive disclosure: the system prompt carries only each skill's name and one-line
description; the `skill` tool loads the full instructions (and any extra files in the
skill's folder) on demand, so twenty skills cost a few hundred tokens, not twenty pages.
Bundled skills live in the `skills/` package; skills in `{data_dir}/skills` override
them by name. That folder mirrors the shared skills in the store (tools/skills/store.py;
folders with a marker file, source "shared") and may hold an operator's own local folders
(source "local"). The index is rendered every turn, after a sync with the store.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from gateway.sdk import ChatRef, Extensions, ToolContext, ToolError, ToolFamily, ToolSpec, UserRef
from tools.args import ToolArgs

log = logging.getLogger(__name__)

GROUP = "skills"
SKILL_FILE = "SKILL.md"
MARKER = ".chatgate-skill.json"  # in a folder mirrored from the store: the skill's metadata
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_DESCRIPTION = 300
_MAX_FILE_BYTES = 256 * 1024
# Sources: "bundled" (the skills package), "local" (an operator's folder in {data_dir}/skills),
# "shared" (in the store, mirrored). Only shared skills may be changed by skill_manage.
SHARED = "shared"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path
    source: str  # "bundled", "local" or "shared"
    author: str = ""  # shared skills: who wrote it, and when (unix time)
    updated: float = 0.0

    def instructions(self) -> str:
        return split_front_matter((self.folder / SKILL_FILE).read_text(encoding="utf-8"))[1]

    def files(self) -> list[str]:
        return sorted(
            str(p.relative_to(self.folder))
            for p in self.folder.rglob("*")
            if p.is_file() and p.name not in (SKILL_FILE, MARKER) and not p.is_symlink()
        )


@dataclass(frozen=True)
class SkillProblem:
    folder: Path
    problem: str


class SkillLibrary:
    """The skills found in a list of folders; later folders override earlier ones by name."""

    def __init__(self, folders: list[tuple[Path, str]]) -> None:
        self._folders = folders
        self._skills: dict[str, Skill] = {}
        self.problems: list[SkillProblem] = []
        self.reload()

    def reload(self) -> None:
        """Read the folders again (after the mirror of shared skills changed)."""
        self._skills = {}
        self.problems = []
        for folder, source in self._folders:
            if folder.is_dir():
                for skill_md in sorted(folder.glob(f"*/{SKILL_FILE}")):
                    self._load(skill_md.parent, source)

    def _load(self, folder: Path, source: str) -> None:
        try:
            meta, _ = split_front_matter(folder.joinpath(SKILL_FILE).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            self._problem(folder, f"cannot read {SKILL_FILE}: {exc}")
            return
        name, description = meta.get("name", ""), " ".join(meta.get("description", "").split())
        if not NAME.match(name):
            self._problem(folder, "front matter needs `name:` in lowercase letters, digits and -")
        elif not description:
            self._problem(folder, "front matter needs a one-line `description:`")
        elif len(description) > MAX_DESCRIPTION:
            self._problem(folder, f"description is longer than {MAX_DESCRIPTION} characters")
        else:
            author, updated = "", 0.0
            if source != "bundled" and (folder / MARKER).is_file():
                source, (author, updated) = SHARED, _marker(folder)
            self._skills[name] = Skill(name, description, folder.resolve(), source, author, updated)

    def _problem(self, folder: Path, problem: str) -> None:
        log.warning("skill skipped folder=%s problem=%s", folder, problem)
        self.problems.append(SkillProblem(folder, problem))

    def all(self) -> list[Skill]:
        return sorted(self._skills.values(), key=lambda s: s.name)

    def get(self, name: str) -> Skill | None:
        return self._skills.get(name)

    def prompt_section(self, chat: ChatRef, user: UserRef) -> str:
        """The index shown in the system prompt (names and descriptions only)."""
        if not self._skills:
            return ""
        lines = [
            "Skills: instructions for particular tasks. When a request matches one, load it "
            'with the skill tool (action "view") before you start, and follow it.'
        ]
        lines += [f"- {s.name}: {s.description}" for s in self.all()]
        return "\n".join(lines)


def bundled_skills_dir() -> Path:
    # `skills/` is installed next to `tools/` (editable or wheel); locating it by path avoids
    # importing it, which a `skills` folder in the working directory could shadow.
    return Path(__file__).resolve().parents[2] / "skills"


def default_library(data_dir: Path) -> SkillLibrary:
    return SkillLibrary([(bundled_skills_dir(), "bundled"), (data_dir / "skills", "local")])


def _marker(folder: Path) -> tuple[str, float]:
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        return str(data.get("author", "")), float(data.get("updated", 0.0))
    except (OSError, ValueError, TypeError, AttributeError):
        return "", 0.0


def live_index(
    library: SkillLibrary, sync: Callable[[], Awaitable[bool]]
) -> Callable[[ChatRef, UserRef], Awaitable[str]]:
    """The skills index as a per-turn prompt section: sync with the store, then render."""

    async def section(chat: ChatRef, user: UserRef) -> str:
        try:
            if await sync():
                library.reload()
        except Exception as exc:  # a stale index beats a failed turn
            log.warning("skills not synced error=%s", exc)
        return library.prompt_section(chat, user)

    return section


class SkillArgs(ToolArgs):
    action: Literal["view", "read_file"] = Field(
        default="view", description="view: the skill's instructions; read_file: one of its files"
    )
    name: str = Field(description="Skill name from the list in your instructions.")
    path: str = Field(default="", description="For read_file: a file listed by view.")


class SkillTools(ToolFamily):
    """The skill tool and the skills index in every prompt. `sync` brings the mirror of the
    shared skills up to date (True: it changed); None: the library's folders are all there is."""

    name = "skills"

    def __init__(
        self, library: SkillLibrary, sync: Callable[[], Awaitable[bool]] | None = None
    ) -> None:
        self.library = library
        self.sync = sync

    def register(self, extensions: Extensions) -> None:
        extensions.add_prompt_section(live_index(self.library, self.sync or _unchanged))

    async def load_skill(self, args: SkillArgs, ctx: ToolContext) -> str:
        skill = self.library.get(args.name)
        if skill is None and self.sync is not None and await self.sync():
            self.library.reload()  # written since this turn started, perhaps on another replica
            skill = self.library.get(args.name)
        if skill is None:
            known = ", ".join(s.name for s in self.library.all()) or "none"
            raise ToolError(f"there is no skill named {args.name!r}. Skills: {known}.")
        if args.action == "view":
            files = skill.files()
            listing = f"\n\nFiles in this skill (read with action read_file): {', '.join(files)}"
            return skill.instructions().strip() + (listing if files else "")
        return _read_skill_file(skill, args.path)

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="skill",
                description=(
                    "Load a skill's full instructions (action view), or a file that belongs to it "
                    "(action read_file). The skills available are listed in your instructions."
                ),
                args=SkillArgs,
                handler=self.load_skill,
                group=GROUP,
            )
        ]


async def _unchanged() -> bool:
    return False


def _read_skill_file(skill: Skill, path: str) -> str:
    if not path:
        raise ToolError("read_file needs `path`: one of the files that view lists.")
    target = (skill.folder / path).resolve()
    if not target.is_relative_to(skill.folder) or not target.is_file():
        raise ToolError(f"{path!r} is not a file of skill {skill.name}. Files: {skill.files()}")
    if target.stat().st_size > _MAX_FILE_BYTES:
        raise ToolError(f"{path} is larger than {_MAX_FILE_BYTES // 1024} KB.")
    return target.read_text(encoding="utf-8", errors="replace")


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """`---` delimited `key: value` lines, then the body. Values may be quoted."""
    if not text.startswith("---"):
        raise ValueError("SKILL.md must start with a `---` front matter block")
    head, sep, body = text[3:].partition("\n---")
    if not sep:
        raise ValueError("the front matter block is not closed with `---`")
    meta: dict[str, str] = {}
    for line in head.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip():
            meta[key.strip().lower()] = value.strip().strip("\"'")
    return meta, body.lstrip("-").lstrip("\n")
