"""Skills kept in the store (written by the agent with skill_manage, or installed by an
operator), shared by every replica and mirrored to `{data_dir}/skills/` for reading.

A skill is a hash of files (`skill:{name}:{digest}`: path -> text) plus a line in
`skills:index` (name -> metadata: description, author, times, digest); `skills:version`
counts changes, so each replica syncs its mirror with one read per turn when nothing
changed, and turns that ask at once share that read. Files are written under a new digest
before the index points at them, so a replica never mirrors half a change. Mirrored folders
carry a marker file; folders without one are an operator's own local skills and are never
touched.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from gateway.sdk import SkillsSettings, Store, keys
from tools.skills.library import MARKER, MAX_DESCRIPTION, NAME, SKILL_FILE, split_front_matter

log = logging.getLogger(__name__)

_PATH_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_MAX_DEPTH = 4


class SkillInvalid(ValueError):
    """A skill that cannot be saved; the message says what to fix."""


@dataclass(frozen=True)
class SkillMeta:
    name: str
    description: str
    author: str  # who wrote it: "telegram:42 (Ana)" or "operator (cli)"
    created: float
    updated: float
    digest: str
    origin: str = "agent"  # "agent" (skill_manage) or "operator" (chatgate skills install)

    def encode(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def decode(cls, raw: str) -> SkillMeta:
        data = json.loads(raw)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def check_path(path: str) -> str:
    """A file path inside a skill's folder, normalised; raises SkillInvalid otherwise."""
    if not path or "\\" in path or "\x00" in path:
        raise SkillInvalid(f"{path!r} is not a valid file path; use a/b.md style relative paths.")
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(part in ("", ".", "..") for part in path.split("/")):
        raise SkillInvalid(f"{path!r} leaves the skill's folder; paths stay inside it.")
    if len(pure.parts) > _MAX_DEPTH or not all(_PATH_PART.match(p) for p in pure.parts):
        raise SkillInvalid(
            f"{path!r}: use at most {_MAX_DEPTH} levels of names made of letters, digits, "
            "'.', '_' and '-' (not starting with a dot)."
        )
    if path == MARKER:
        raise SkillInvalid(f"{MARKER} is reserved.")
    return str(pure)


def validate(name: str, files: dict[str, str], limits: SkillsSettings) -> str:
    """Check a whole skill; returns its description."""
    if not NAME.match(name):
        raise SkillInvalid(
            f"{name!r} is not a valid skill name: lowercase letters, digits and '-', "
            "starting with a letter or digit, at most 64."
        )
    if SKILL_FILE not in files:
        raise SkillInvalid(f"a skill needs a {SKILL_FILE} with its instructions.")
    if len(files) > limits.max_files:
        raise SkillInvalid(f"a skill holds at most {limits.max_files} files.")
    total = 0
    for path, text in files.items():
        check_path(path)
        size = len(text.encode("utf-8"))
        if size > limits.max_file_bytes:
            raise SkillInvalid(f"{path} is {size:,} bytes; the limit is {limits.max_file_bytes:,}.")
        total += size
    if total > limits.max_skill_bytes:
        raise SkillInvalid(
            f"the skill is {total:,} bytes; the limit is {limits.max_skill_bytes:,}."
        )
    try:
        meta, body = split_front_matter(files[SKILL_FILE])
    except ValueError as exc:
        raise SkillInvalid(f"{SKILL_FILE}: {exc} (name: and description: lines).") from None
    if meta.get("name") != name:
        raise SkillInvalid(f"{SKILL_FILE} front matter needs `name: {name}`.")
    description = " ".join(meta.get("description", "").split())
    if not description:
        raise SkillInvalid(f"{SKILL_FILE} front matter needs a one-line `description:`.")
    if len(description) > MAX_DESCRIPTION:
        raise SkillInvalid(f"the description is longer than {MAX_DESCRIPTION} characters.")
    if not body.strip():
        raise SkillInvalid(f"{SKILL_FILE} has no instructions after the front matter.")
    return description


def digest_of(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return h.hexdigest()[:16]


class SkillStore:
    """The shared skills in the store and this replica's mirror of them."""

    def __init__(self, store: Store, folder: Path, limits: SkillsSettings) -> None:
        self._store = store
        self.folder = folder
        self.limits = limits
        self._version: str | None = None
        self._syncing: asyncio.Task[bool] | None = None

    # -- reading ------------------------------------------------------------------------

    async def index(self) -> dict[str, SkillMeta]:
        raw = await self._store.hgetall(keys.SKILLS_INDEX)
        return {name: SkillMeta.decode(value) for name, value in sorted(raw.items())}

    async def files(self, name: str) -> tuple[SkillMeta, dict[str, str]] | None:
        raw = await self._store.hget(keys.SKILLS_INDEX, name)
        if raw is None:
            return None
        meta = SkillMeta.decode(raw)
        return meta, await self._store.hgetall(_files_key(name, meta.digest))

    async def sync(self) -> bool:
        """Bring the mirror up to date; True when something changed. One read when nothing did.

        Callers while a sync runs share it: a burst of turns (or the first wave after a start,
        which all find the mirror empty) reads and mirrors once, not once per turn. A change
        made here (`put`, `delete`) starts a fresh one, so the changer's next sync sees it."""
        if self._syncing is None:
            self._syncing = asyncio.create_task(self._sync(), name="skills sync")
            self._syncing.add_done_callback(self._synced)
        # Shielded: one caller cancelled (its turn stopped) does not cancel the others' sync.
        return await asyncio.shield(self._syncing)

    def _synced(self, task: asyncio.Task[bool]) -> None:
        if self._syncing is task:
            self._syncing = None
        if not task.cancelled():
            task.exception()  # retrieved: every caller may have gone before it ended

    def _changed(self) -> None:
        self._syncing = None  # a sync already under way may have read before the change

    async def _sync(self) -> bool:
        version = await self._store.get(keys.SKILLS_VERSION) or "0"
        if version == self._version:
            return False
        index = await self.index()
        complete = True
        for name, meta in index.items():
            if _mirrored_digest(self.folder / name) == meta.digest:
                continue
            files = await self._store.hgetall(_files_key(name, meta.digest))
            if SKILL_FILE not in files:  # replaced while we read; the next sync gets it
                complete = False
                continue
            self._mirror(meta, files)
        if self.folder.is_dir():
            for folder in self.folder.iterdir():
                if folder.name not in index and (folder / MARKER).is_file():
                    shutil.rmtree(folder, ignore_errors=True)
        if complete:
            self._version = version
        return True

    # -- writing ------------------------------------------------------------------------

    async def put(
        self, name: str, files: dict[str, str], *, author: str, origin: str = "agent"
    ) -> SkillMeta:
        """Create or replace a skill as a whole (validated)."""
        description = validate(name, files, self.limits)
        found = await self.files(name)
        now = time.time()
        meta = SkillMeta(
            name,
            description,
            author,
            found[0].created if found else now,
            now,
            digest_of(files),
            origin,
        )
        if found and found[0].digest == meta.digest:
            return found[0]
        for path, text in files.items():
            await self._store.hset(_files_key(name, meta.digest), check_path(path), text)
        await self._store.hset(keys.SKILLS_INDEX, name, meta.encode())
        await self._store.incr(keys.SKILLS_VERSION)
        self._changed()
        if found:
            await self._store.delete(_files_key(name, found[0].digest))
        log.info("skill saved name=%s author=%s digest=%s", name, author, meta.digest)
        return meta

    async def delete(self, name: str) -> bool:
        found = await self.files(name)
        if found is None:
            return False
        await self._store.hdel(keys.SKILLS_INDEX, name)
        await self._store.incr(keys.SKILLS_VERSION)
        self._changed()
        await self._store.delete(_files_key(name, found[0].digest))
        log.info("skill deleted name=%s", name)
        return True

    # -- the mirror ---------------------------------------------------------------------

    def _mirror(self, meta: SkillMeta, files: dict[str, str]) -> None:
        target = self.folder / meta.name
        if target.exists() and not (target / MARKER).is_file():
            log.warning("skill not mirrored: a local folder has its name name=%s", meta.name)
            return
        staging = self.folder / f".staging-{meta.name}-{uuid.uuid4().hex[:8]}"
        staging.mkdir(parents=True)
        for path, text in files.items():
            file = staging / check_path(path)
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text, encoding="utf-8")
        (staging / MARKER).write_text(meta.encode(), encoding="utf-8")
        old = self.folder / f".old-{meta.name}-{uuid.uuid4().hex[:8]}"
        if target.exists():
            target.rename(old)
        staging.rename(target)
        shutil.rmtree(old, ignore_errors=True)


def read_marker(folder: Path) -> SkillMeta | None:
    try:
        return SkillMeta.decode((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return None


def _mirrored_digest(folder: Path) -> str | None:
    meta = read_marker(folder)
    return meta.digest if meta else None


def _files_key(name: str, digest: str) -> str:
    return keys.skill(f"{name}:{digest}")
