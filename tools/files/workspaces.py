"""Which workspace a conversation's tools use (`tools.workspace_scope`): the shared root, a
folder per chat, or a folder per person in a chat; and wiping a chat's folder for /forget.

Layout under `tools.workspace` (folder names are escaped ids, so no id can make a path):
    shared  the root itself (one workspace for everybody, as before)
    chat    {root}/{platform}-{chat_id}/           threads of a chat share it
    user    {root}/{platform}-{chat_id}/u-{user_id}/   each person's own, per chat
"""

from __future__ import annotations

import errno
import hashlib
import os
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gateway.sdk import ChatRef, ConfigError, ToolContext, UserRef
from tools.files.beneath import remove_tree, tree_usage
from tools.files.workspace import Workspace

Scope = Literal["shared", "chat", "user"]

_MAX_NAME = 120  # bytes of escaped id kept before a hash stands in for the rest
_PLATFORM_CHARS = frozenset(string.ascii_lowercase + string.digits)
_ID_CHARS = frozenset(string.ascii_letters + string.digits + "-")


@dataclass(frozen=True)
class Usage:
    """How much a workspace folder holds (or held, after a wipe)."""

    files: int  # everything but directories (symlinks count, their targets do not)
    bytes: int  # sizes of the regular files


class WorkspaceUnavailable(ConfigError):
    """The workspace root cannot be created or written: found at start, said in one line."""

    def __init__(self, root: Path, reason: str) -> None:
        super().__init__(
            [
                f"tools.workspace: cannot use {root} ({reason}); set tools.workspace "
                "(CHATGATE_TOOLS__WORKSPACE) to a directory chatgate may write, or change "
                "data_dir, beside which it is made by default"
            ]
        )


class Workspaces:
    """Finds the workspace for a tool call; `for_context` is the `WorkspaceFor` tools take."""

    def __init__(self, root: Path, scope: Scope = "chat", *, quota_bytes: int = 0) -> None:
        self.root = root.expanduser()
        self.quota_bytes = quota_bytes  # 0: none
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkspaceUnavailable(self.root, exc.strerror or str(exc)) from None
        # Checked now, not at the first file a tool writes (os.access: root passes anyway).
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise WorkspaceUnavailable(self.root, "not writable")
        self.scope: Scope = scope
        # Called with a folder about to be wiped, before its files go (processes running in
        # it are stopped: tools/shell/processes.py).
        self.wiping: list[Callable[[Path], None]] = []

    def for_context(self, ctx: ToolContext) -> Workspace:
        """The workspace of the conversation a call runs in (sub-agents share their parent's
        context, so they share its workspace)."""
        return self.for_chat(ctx.chat, ctx.user)

    def for_chat(self, chat: ChatRef, user: UserRef) -> Workspace:
        """The workspace of `user` in `chat`, created (mode 0o700) on first use."""
        return Workspace(self.root, scope=self.folder(chat, user), quota_bytes=self.quota_bytes)

    def folder(self, chat: ChatRef, user: UserRef | None = None) -> tuple[str, ...]:
        """Path parts under the root: () for shared; the chat's folder, then the person's in
        the user scope (the chat's folder alone when no user is given)."""
        if self.scope == "shared":
            return ()
        platform = _escape(chat.platform, _PLATFORM_CHARS)
        chat_folder = f"{platform}-{_escape(chat.chat_id, _ID_CHARS)}"
        if self.scope == "user" and user is not None:
            return (chat_folder, f"u-{_escape(user.user_id, _ID_CHARS)}")
        return (chat_folder,)

    @property
    def per_conversation(self) -> bool:
        """Whether a chat has a folder of its own that /forget may offer to wipe."""
        return self.scope != "shared"

    def usage(self, chat: ChatRef, user: UserRef | None = None) -> Usage:
        """Files and bytes in the chat's folder (the person's alone in the user scope when
        `user` is given); zero when it does not exist yet."""
        parent, name = self._open_parent(chat, user)
        if parent is None:
            return Usage(0, 0)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        except OSError:
            return Usage(0, 0)
        finally:
            os.close(parent)
        try:
            files, size = tree_usage(fd)
        finally:
            os.close(fd)
        return Usage(files, size)

    def wipe(self, chat: ChatRef, user: UserRef | None = None) -> Usage:
        """Delete the chat's workspace folder and everything in it (in the user scope, only the
        person's folder when `user` is given); returns what was removed.

        Nothing is followed: a symlink inside is removed, never its target, and a link in the
        folder's place is removed alone. Refuses the shared scope, whose root belongs to all.
        """
        if not self.per_conversation:
            raise ValueError("the shared workspace belongs to every chat and is never wiped")
        folder = self.root.resolve().joinpath(*self.folder(chat, user))
        for listener in self.wiping:
            listener(folder)
        parent, name = self._open_parent(chat, user)
        if parent is None:
            return Usage(0, 0)
        try:
            files, size = remove_tree(parent, name)
        except FileNotFoundError:
            return Usage(0, 0)
        finally:
            os.close(parent)
        return Usage(files, size)

    def _open_parent(self, chat: ChatRef, user: UserRef | None) -> tuple[int | None, str]:
        """An fd of the folder holding this chat's (or person's) folder, and that folder's
        name; None when the parent does not exist."""
        *above, name = self.folder(chat, user)
        try:
            fd = os.open(self.root.resolve(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None, name
        for part in above:
            try:
                child = os.open(
                    part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    return None, name
                raise
            os.close(fd)
            fd = child
        return fd, name


def _escape(text: str, keep: frozenset[str]) -> str:
    """`text` as a folder-name part: kept characters as they are, every other byte as `_xx`
    (so `.`, `/` and `_` itself never appear raw and two ids never share a name); a long id
    is cut and ends in `~` and a hash, which no escaped id can end in."""
    out = "".join(
        chr(byte) if chr(byte) in keep else f"_{byte:02x}" for byte in text.encode("utf-8")
    )
    if len(out) > _MAX_NAME:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        out = f"{out[: _MAX_NAME - 17]}~{digest}"
    return out or "_"
