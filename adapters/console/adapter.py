"""A terminal adapter: `chatgate chat` and `chatgate ask` talk to the agent through it.

It goes through the whole admission chain (access, dedupe, sessions, commands), so what
works here works on the chat platforms too.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
import uuid
from typing import TextIO

from gateway.sdk import Capabilities, ChatKind, ChatRef, Inbound, Outbound, SentRef, UserRef

PLATFORM = "console"


class ConsoleAdapter:
    platform = PLATFORM
    # Files "sent" here are named on the terminal (they are on this machine already).
    capabilities = Capabilities(
        max_len=1_000_000,
        can_edit=True,
        buttons=False,
        typing=False,
        max_upload_bytes=1_000_000_000,
    )

    def __init__(
        self,
        chat_id: str = "local",
        user_id: str = "local",
        *,
        out: TextIO | None = None,
        echo: bool = True,
    ) -> None:
        self.chat = ChatRef(platform=PLATFORM, chat_id=chat_id, kind=ChatKind.DIRECT)
        self.user = UserRef(platform=PLATFORM, user_id=user_id, display_name=user_id)
        self._out = out or sys.stdout
        self._echo = echo
        self._ids = itertools.count(1)
        self.sent: list[Outbound] = []  # everything sent, for `ask` and tests
        self.edits: list[tuple[SentRef, Outbound]] = []
        self.received = asyncio.Event()
        # Messages with buttons wait for the person: `ask` and `chat` show them and read the
        # answer (`/approve ID`) from the terminal, since the terminal has no buttons to press.
        self.questions: asyncio.Queue[Outbound] = asyncio.Queue()

    def inbound(
        self,
        text: str,
        *,
        chat_id: str | None = None,
        user_id: str | None = None,
        event_id: str | None = None,
    ) -> Inbound:
        """A message from the terminal user (or, in tests, from another chat or person)."""
        chat = self.chat if chat_id is None else self.chat.model_copy(update={"chat_id": chat_id})
        user = self.user
        if user_id is not None:
            user = UserRef(platform=PLATFORM, user_id=user_id, display_name=user_id)
        return Inbound(
            event_id=event_id or f"console-{uuid.uuid4().hex}",
            chat=chat,
            sender=user,
            text=text,
            mentioned=True,
            received_at=time.time(),
        )

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, out: Outbound) -> SentRef:
        self.sent.append(out)
        self.received.set()
        if out.buttons:
            self.questions.put_nowait(out)
        if self._echo:
            if out.text or not out.attachments:
                self._print(out.text)
            for file in out.attachments:
                self._print(f"[file: {file.name} ({file.mime_type}, {file.size:,} bytes)]")
            for row in out.buttons:
                self._print("  " + "   ".join(f"[{b.label}]" for b in row))
        return SentRef(chat=out.chat, message_id=str(next(self._ids)))

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        self.edits.append((ref, out))
        if self._echo:
            self._print(f"(message {ref.message_id} updated) {out.text}")

    async def typing(self, chat: ChatRef) -> None:
        return None

    def _print(self, text: str) -> None:
        self._out.write(text.rstrip() + "\n")
        self._out.flush()
