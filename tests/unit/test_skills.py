"""Skills: SKILL.md discovery, validation, overrides, and progressive disclosure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError
from gateway.sessions.key import SessionKey
from tools.skills.library import SkillLibrary, SkillTools, bundled_skills_dir, default_library

CTX = ToolContext(
    session=SessionKey("console", "c"),
    chat=ChatRef(platform="console", chat_id="c"),
    user=UserRef(platform="console", user_id="u"),
)


def write_skill(root: Path, folder: str, front: str, body: str = "Do the thing.\n") -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\n{front}\n---\n{body}")
    return path


def test_bundled_skills_are_valid() -> None:
    library = default_library(Path("/nonexistent"))
    names = [s.name for s in library.all()]
    assert {"web-research", "reminders", "git-workflow", "data-files"} <= set(names)
    assert library.problems == []
    assert all(s.source == "bundled" for s in library.all())
    assert bundled_skills_dir().joinpath("reminders", "SKILL.md").is_file()


def test_installed_skill_overrides_bundled_and_bad_ones_are_reported(tmp_path: Path) -> None:
    bundled, installed = tmp_path / "b", tmp_path / "i"
    write_skill(bundled, "a", "name: alpha\ndescription: bundled alpha")
    write_skill(installed, "a2", 'name: alpha\ndescription: "installed alpha"')
    write_skill(installed, "bad", "name: Not Valid\ndescription: x")
    write_skill(installed, "nodesc", "name: nodesc")
    (installed / "nofront").mkdir()
    (installed / "nofront" / "SKILL.md").write_text("just text")
    library = SkillLibrary([(bundled, "bundled"), (installed, "installed")])
    alpha = library.get("alpha")
    assert alpha is not None and alpha.description == "installed alpha"
    assert alpha.source == "installed"
    problems = sorted(p.folder.name for p in library.problems)
    assert problems == ["bad", "nodesc", "nofront"]


def test_prompt_section_lists_names_and_descriptions_only(tmp_path: Path) -> None:
    write_skill(tmp_path, "s", "name: secret-sauce\ndescription: make sauce", "STEP ONE: ...\n")
    library = SkillLibrary([(tmp_path, "installed")])
    section = library.prompt_section(CTX.chat, CTX.user)
    assert "- secret-sauce: make sauce" in section
    assert "STEP ONE" not in section
    assert SkillLibrary([]).prompt_section(CTX.chat, CTX.user) == ""


async def call(library: SkillLibrary, **args: Any) -> str:
    (spec,) = SkillTools(library).specs()
    return await spec.handler(spec.args(**args), CTX)


async def test_view_and_read_file(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "s", "name: sauce\ndescription: d", "# Sauce\nStir well.\n")
    (folder / "ref").mkdir()
    (folder / "ref" / "ratios.md").write_text("1:2")
    library = SkillLibrary([(tmp_path, "installed")])
    view = await call(library, name="sauce")
    assert view.startswith("# Sauce\nStir well.") and "ref/ratios.md" in view
    assert await call(library, name="sauce", action="read_file", path="ref/ratios.md") == "1:2"


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "SKILL2.md", ""])
async def test_read_file_refuses_paths_outside_the_skill(tmp_path: Path, path: str) -> None:
    write_skill(tmp_path, "s", "name: sauce\ndescription: d")
    with pytest.raises(ToolError):
        await call(
            SkillLibrary([(tmp_path, "installed")]), name="sauce", action="read_file", path=path
        )


async def test_unknown_skill_lists_the_known_ones(tmp_path: Path) -> None:
    write_skill(tmp_path, "s", "name: sauce\ndescription: d")
    with pytest.raises(ToolError, match="Skills: sauce"):
        await call(SkillLibrary([(tmp_path, "installed")]), name="soup")


def test_skills_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.app.cli import main

    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path))
    assert main(["skills", "list"]) == 0
    listing = capsys.readouterr().out
    assert "reminders" in listing and "bundled" in listing
    assert main(["skills", "show", "git-workflow"]) == 0
    assert "# Git workflow" in capsys.readouterr().out
    write_skill(tmp_path / "skills", "broken", "name: Bad Name\ndescription: x")
    assert main(["skills", "list"]) == 1
    assert "skipped" in capsys.readouterr().out
    assert main(["skills", "show", "nope"]) == 1


def test_skills_cli_install_list_remove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.app.cli import main

    data = tmp_path / "data"
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(data))
    source = write_skill(tmp_path / "src", "deploy", "name: deploy\ndescription: ship it", "Go.\n")
    (source / "scripts").mkdir()
    (source / "scripts" / "run.sh").write_text("echo ship\n")
    assert main(["skills", "install", str(source)]) == 0
    assert "installed deploy (2 files" in capsys.readouterr().out
    assert (data / "skills" / "deploy" / "scripts" / "run.sh").read_text() == "echo ship\n"
    assert main(["skills", "list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("deploy"))
    assert "shared" in line and "by operator (chatgate skills install)" in line
    assert main(["skills", "remove", "git-workflow"]) == 1
    assert "ships with chatgate" in capsys.readouterr().err
    assert main(["skills", "remove", "deploy"]) == 0
    assert not (data / "skills" / "deploy").exists()
    assert main(["skills", "remove", "deploy"]) == 1


def test_skills_cli_installs_from_a_git_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess

    from gateway.app.cli import main

    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path / "data"))
    work = tmp_path / "work"
    write_skill(work, "one", "name: one\ndescription: first")
    write_skill(work, "two", "name: two\ndescription: second")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    subprocess.run([*git, "-C", str(work), "add", "."], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "skills"], check=True)
    bare = tmp_path / "skills.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    assert main(["skills", "install", str(bare)]) == 0
    out = capsys.readouterr().out
    assert "installed one" in out and "installed two" in out
    # A path escape in a folder is refused and nothing is installed.
    bad = write_skill(tmp_path / "bad", "x", "name: bad-one\ndescription: d")
    (bad / ".hidden").write_text("x")
    assert main(["skills", "install", str(bad)]) == 1
    assert "not starting with a dot" in capsys.readouterr().err


@pytest.mark.parametrize("link", ["skill-folder", "subfolder", "skill-file"])
def test_skills_cli_refuses_symlinks_in_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    """Issue 30: a repository whose skill folder is a symbolic link to a folder on the host
    installed that folder's files as a shared skill the model can read."""
    import subprocess

    from gateway.app.cli import main

    data = tmp_path / "data"
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(data))
    secret = write_skill(tmp_path / "host", "keys", "name: keys\ndescription: host files")
    (secret / "id_rsa").write_text("PRIVATE KEY")
    work = tmp_path / "work"
    write_skill(work, "fine", "name: fine\ndescription: ok")
    if link == "skill-folder":
        (work / "keys").symlink_to(secret)
    elif link == "subfolder":
        (work / "fine" / "more").symlink_to(secret)
    else:
        write_skill(work, "other", "name: other\ndescription: d")
        (work / "other" / "SKILL.md").unlink()
        (work / "other" / "SKILL.md").symlink_to(secret / "SKILL.md")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    subprocess.run([*git, "-C", str(work), "add", "."], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "skills"], check=True)
    bare = tmp_path / "skills.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    assert main(["skills", "install", str(bare)]) == 1
    assert "is a symbolic link; skills hold plain files only" in capsys.readouterr().err
    assert not (data / "skills").exists() or not any((data / "skills").iterdir())


async def test_shared_skills_sync_between_replicas(tmp_path: Path) -> None:
    from gateway.config import SkillsSettings
    from gateway.store.embedded import EmbeddedStore
    from tools.skills.store import SkillInvalid, SkillStore

    store = EmbeddedStore(tmp_path / "store")
    try:
        a = SkillStore(store, tmp_path / "a", SkillsSettings())
        b = SkillStore(store, tmp_path / "b", SkillsSettings())
        assert await b.sync() is True  # the first look
        assert await b.sync() is False  # nothing changed: one read, nothing else
        files = {"SKILL.md": "---\nname: soup\ndescription: make soup\n---\nBoil.\n"}
        await a.put("soup", files, author="console:ana (ana)")
        assert await b.sync() is True
        assert (tmp_path / "b" / "soup" / "SKILL.md").read_text() == files["SKILL.md"]
        library = SkillLibrary([(tmp_path / "b", "local")])
        soup = library.get("soup")
        assert soup is not None and soup.source == "shared" and soup.author == "console:ana (ana)"
        # A local folder of the operator's is never touched by the mirror.
        write_skill(tmp_path / "b", "mine", "name: mine\ndescription: local one")
        await a.delete("soup")
        assert await b.sync() is True
        assert not (tmp_path / "b" / "soup").exists() and (tmp_path / "b" / "mine").is_dir()
        with pytest.raises(SkillInvalid, match="is 300,001 bytes"):
            big = {**files, "data.txt": "x" * 300_001}
            await a.put("soup", big, author="x")
    finally:
        await store.close()


async def test_turns_syncing_at_once_share_one_read(tmp_path: Path) -> None:
    import asyncio

    from gateway.config import SkillsSettings
    from gateway.store.embedded import EmbeddedStore
    from tools.skills.store import SkillStore

    class CountingStore(EmbeddedStore):
        reads = 0

        async def get(self, key: str) -> str | None:
            CountingStore.reads += 1
            value = await super().get(key)
            await asyncio.sleep(0.01)  # the answer on its way back while other turns ask
            return value

    store = CountingStore(tmp_path / "store")
    try:
        files = {"SKILL.md": "---\nname: soup\ndescription: make soup\n---\nBoil.\n"}
        writer = SkillStore(store, tmp_path / "w", SkillsSettings())
        await writer.put("soup", files, author="x")
        mirror = SkillStore(store, tmp_path / "m", SkillsSettings())
        first = asyncio.create_task(mirror.sync())
        await asyncio.sleep(0)
        # A turn that stops while waiting does not stop the others' sync.
        stopped = asyncio.create_task(mirror.sync())
        await asyncio.sleep(0)
        stopped.cancel()
        results = await asyncio.gather(first, *(mirror.sync() for _ in range(50)))
        assert results == [True] * 51 and CountingStore.reads == 1
        assert (tmp_path / "m" / "soup" / "SKILL.md").is_file()
        # A change made here while a sync is under way: the next sync reads afresh.
        before = CountingStore.reads
        running = asyncio.create_task(mirror.sync())
        await asyncio.sleep(0.002)  # its read is done; the answer is on its way back
        await mirror.delete("soup")
        assert await mirror.sync() is True and not (tmp_path / "m" / "soup").exists()
        await running
        assert CountingStore.reads - before == 2
    finally:
        await store.close()
