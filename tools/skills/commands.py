"""What `chatgate skills list | show NAME | install PATH_OR_GIT_URL | remove NAME` run.

Shared skills live in the store, so install and remove need it (with the embedded store, the
gateway must be stopped: that store serves one process). list and show read the store when
they can and the local mirror in `{data_dir}/skills` when they cannot.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.sdk import Settings, StoreLocked, StoreUnavailable, open_store
from tools.skills.library import (
    MARKER,
    SHARED,
    SKILL_FILE,
    SkillLibrary,
    default_library,
    split_front_matter,
)
from tools.skills.store import SkillInvalid, SkillStore, check_path

EXIT_OK, EXIT_FAILED = 0, 1
_GIT_PREFIXES = ("https://", "http://", "ssh://", "git://", "git@")
OPERATOR = "operator (chatgate skills install)"


def _with_skills(
    settings: Settings,
    body: Callable[[SkillStore | None, SkillLibrary], Awaitable[int]],
    *,
    need: bool,
) -> int:
    """Run `body` with the synced store; without a store (locked or down) run it on the mirror
    unless the command `need`s the store."""
    data_dir = settings.data_dir.expanduser()
    library = default_library(data_dir)

    async def run() -> int:
        try:
            store = open_store(settings)
        except (StoreLocked, StoreUnavailable) as exc:
            if need:
                print(
                    f"chatgate skills: {exc}. Stop the gateway to change skills.", file=sys.stderr
                )
                return EXIT_FAILED
            print(f"(the store is busy or unreachable; showing the local mirror: {exc})")
            return await body(None, library)
        try:
            skills = SkillStore(store, data_dir / "skills", settings.skills)
            await skills.sync()
            library.reload()
            return await body(skills, library)
        except StoreUnavailable as exc:
            print(f"chatgate skills: the store is unreachable: {exc}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            await store.close()

    return asyncio.run(run())


def _cmd_list(settings: Settings, args: Any) -> int:
    async def body(skills: SkillStore | None, library: SkillLibrary) -> int:
        for skill in library.all():
            who = ""
            if skill.source == SHARED:
                when = datetime.fromtimestamp(skill.updated, UTC).strftime("%Y-%m-%d")
                who = f" [by {skill.author}, {when}]"
            print(f"{skill.name:24} {skill.source:8} {skill.description}{who}")
        if not library.all():
            print("no skills; add some with `chatgate skills install`")
        for problem in library.problems:
            print(f"skipped {problem.folder}: {problem.problem}")
        return EXIT_FAILED if library.problems else EXIT_OK

    return _with_skills(settings, body, need=False)


def _cmd_show(settings: Settings, args: Any) -> int:
    async def body(skills: SkillStore | None, library: SkillLibrary) -> int:
        skill = library.get(args.name)
        if skill is None:
            print(f"chatgate: there is no skill named {args.name!r} (see `chatgate skills list`)")
            return EXIT_FAILED
        by = f", by {skill.author}" if skill.author else ""
        print(f"# {skill.name} ({skill.source}{by}, {skill.folder})\n{skill.description}\n")
        print(skill.instructions().strip())
        if skill.files():
            print("\nFiles: " + ", ".join(skill.files()))
        return EXIT_OK

    return _with_skills(settings, body, need=False)


def _cmd_install(settings: Settings, args: Any) -> int:
    async def body(skills: SkillStore | None, library: SkillLibrary) -> int:
        assert skills is not None  # need=True
        with tempfile.TemporaryDirectory(prefix="chatgate-skill-") as tmp:
            try:
                root = _fetch(args.source, Path(tmp))
                found = read_skill_folders(root)
            except SkillInvalid as exc:
                print(f"chatgate skills: {exc}", file=sys.stderr)
                return EXIT_FAILED
            for name, files in found:
                known = library.get(name)
                if known is not None and known.source != SHARED:
                    print(
                        f"chatgate skills: {name} is a {known.source} skill ({known.folder}); "
                        "pick another name",
                        file=sys.stderr,
                    )
                    return EXIT_FAILED
                try:
                    meta = await skills.put(name, files, author=OPERATOR, origin="operator")
                except SkillInvalid as exc:
                    print(f"chatgate skills: {name}: {exc}", file=sys.stderr)
                    return EXIT_FAILED
                print(f"installed {name} ({len(files)} files, {meta.digest})")
        await skills.sync()
        return EXIT_OK

    return _with_skills(settings, body, need=True)


def _cmd_remove(settings: Settings, args: Any) -> int:
    async def body(skills: SkillStore | None, library: SkillLibrary) -> int:
        assert skills is not None  # need=True
        known = library.get(args.name)
        if known is not None and known.source != SHARED:
            print(
                f"chatgate skills: {args.name} is a {known.source} skill; "
                + (
                    "it ships with chatgate"
                    if known.source == "bundled"
                    else f"delete {known.folder}"
                ),
                file=sys.stderr,
            )
            return EXIT_FAILED
        if not await skills.delete(args.name):
            print(f"chatgate skills: there is no shared skill named {args.name!r}", file=sys.stderr)
            return EXIT_FAILED
        await skills.sync()
        print(f"removed {args.name}")
        return EXIT_OK

    return _with_skills(settings, body, need=True)


def _fetch(source: str, tmp: Path) -> Path:
    if source.startswith(_GIT_PREFIXES) or source.endswith(".git"):
        target = tmp / "repo"
        try:
            done = subprocess.run(
                ["git", "clone", "--quiet", "--depth", "1", "--", source, str(target)],
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SkillInvalid(f"cannot run git clone: {exc}") from None
        if done.returncode != 0:
            raise SkillInvalid(f"git clone failed: {done.stderr.strip()[-500:]}")
        return target
    path = Path(source).expanduser()
    if not path.is_dir():
        raise SkillInvalid(f"{source} is not a folder or a git URL")
    return path


def read_skill_folders(root: Path) -> list[tuple[str, dict[str, str]]]:
    """The skills under `root`: itself when it holds a SKILL.md, else each subfolder that does."""
    folders = (
        [root]
        if (root / SKILL_FILE).is_file()
        else sorted(p.parent for p in root.glob(f"*/{SKILL_FILE}"))
    )
    if not folders:
        raise SkillInvalid(f"no {SKILL_FILE} in {root} or its subfolders")
    for folder in folders:
        # A repository's link would install files from wherever it points on this host.
        if folder != root and folder.is_symlink():
            raise SkillInvalid(f"{folder.name} is a symbolic link; skills hold plain files only")
    return [_read_folder(folder) for folder in folders]


def _read_folder(folder: Path) -> tuple[str, dict[str, str]]:
    files: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if relative.split("/")[0] in (".git", MARKER):
            continue
        # Before the folder check: a link to a folder is refused, not skipped.
        if path.is_symlink():
            raise SkillInvalid(f"{relative} is a symbolic link; skills hold plain files only")
        if path.is_dir():
            continue
        check_path(relative)
        try:
            files[relative] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise SkillInvalid(f"{relative} is not UTF-8 text; skills hold text files") from None
    try:
        meta, _ = split_front_matter(files.get(SKILL_FILE, ""))
    except ValueError as exc:
        raise SkillInvalid(f"{folder / SKILL_FILE}: {exc}") from None
    return meta.get("name", folder.name), files
