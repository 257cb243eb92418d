"""What `chatgate ask` and `chat` do while a turn waits for the person at the terminal.

The terminal has no buttons: an approval prompt (or any question with choices) is printed and
the answer is typed (`/approve ID`). `ask` without a terminal cannot be answered, so it says
in one line what waits and where it can be approved, and gives up at once (exit code 3).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TextIO

from gateway.approvals.records import ApprovalChoice
from gateway.sdk.callbacks import CallbackDataError
from gateway.sdk.messages import Outbound
from gateway.sdk.outcome import TurnOutcome

if TYPE_CHECKING:
    from adapters.console.adapter import ConsoleAdapter
    from gateway.app.app import App

EXIT_WAITING = 3  # `ask`: a person must decide and there is no terminal to ask


class TerminalLines:
    """Lines typed at stdin, read by a daemon thread so that a pending read never keeps the
    process alive, and with `os.read` so that no buffered-stdin lock is held at exit."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int = 0) -> None:
        self._loop = loop
        self._fd = fd
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()  # None: end of input
        threading.Thread(target=self._read, name="terminal lines", daemon=True).start()

    async def get(self) -> str | None:
        return await self._lines.get()

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self._fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                if pending:
                    self._post(pending.decode(errors="replace"))
                self._post(None)
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                self._post(line.decode(errors="replace").rstrip("\r"))

    def _post(self, line: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening
            self._loop.call_soon_threadsafe(self._lines.put_nowait, line)


def approval_id(out: Outbound) -> str | None:
    """The request id when `out` is an approval prompt (its buttons say so)."""
    for row in out.buttons:
        for button in row:
            with contextlib.suppress(CallbackDataError):
                return ApprovalChoice.unpack(button.data).request_id
    return None


async def waiting_line(app: App, out: Outbound) -> str:
    """One line for `ask` without a terminal: what waits, and how it can be decided."""
    request_id = approval_id(out)
    if request_id is None:
        return (
            "chatgate: the agent asks a question with choices and there is no terminal to "
            "answer it; run `chatgate chat` to talk with it."
        )
    found = [r for r in await app.approvals.pending_requests() if r.id == request_id]
    what = f"{found[0].tool} `{_short(found[0].command)}`" if found else "a tool call"
    return (
        f"chatgate: {what} waits for approval (request {request_id}) and there is no terminal "
        "to ask, so it was not run; run the request in `chatgate chat` (answer /approve ID), "
        "or send it through the running gateway and approve it in the console at /admin."
    )


def _short(command: str, limit: int = 80) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class TerminalTurn:
    """Follows one submitted turn: prints questions to `err`, submits typed answers."""

    def __init__(self, app: App, console: ConsoleAdapter, err: TextIO) -> None:
        self._app = app
        self._console = console
        self._err = err
        self.shown: set[int] = set()  # ids of messages printed to `err`, not part of the answer
        self._approval = False  # the last question is an approval prompt
        self._asked = False  # a question was shown: typed lines answer it

    async def ask(
        self, done: Awaitable[TurnOutcome], lines: TerminalLines | None
    ) -> TurnOutcome | str:
        """The turn's outcome, or (no terminal) the line saying what waits for a decision."""
        turn = asyncio.ensure_future(done)
        question = asyncio.ensure_future(self._console.questions.get())
        typed: asyncio.Future[str | None] | None = None
        try:
            while not turn.done():
                if typed is None and lines is not None:
                    typed = asyncio.ensure_future(lines.get())
                waits = {turn, question} | ({typed} if typed is not None else set())
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if question.done():
                    out = question.result()
                    self.shown.add(id(out))
                    if lines is None:
                        return await waiting_line(self._app, out)
                    self._approval = approval_id(out) is not None
                    self._asked = True
                    self._print(out.text)
                    self._print(self._how_to_answer(out))
                    question = asyncio.ensure_future(self._console.questions.get())
                if typed is not None and typed.done():
                    line, typed = typed.result(), None
                    if line is None:
                        lines = None  # end of input: nothing more can be typed
                    elif line.strip():
                        await self._submit(line.strip())
            return turn.result()
        finally:
            for task in (question, typed):
                if task is not None:
                    task.cancel()

    async def _submit(self, line: str) -> None:
        if not self._asked:  # typed ahead: `ask` takes one message, the one on its command line
            self._print("(nothing waits for an answer yet; this line is ignored)")
            return
        if self._approval and not line.startswith("/"):
            self._print("A request is waiting: answer it with /approve ID or /deny ID [reason].")
            return
        before = len(self._console.sent)
        submission = await self._app.admission.submit(self._console.inbound(line))
        if submission.done.done():  # commands and typed answers are answered inline
            await submission.done
        for out in self._console.sent[before:]:
            if id(out) not in self.shown and not out.buttons:
                self.shown.add(id(out))
                self._print(out.text)

    def _how_to_answer(self, out: Outbound) -> str:
        request_id = approval_id(out)
        if request_id is None:
            return "(type your answer)"
        return f"Type /approve {request_id} or /deny {request_id} [reason]:"

    def _print(self, text: str) -> None:
        self._err.write(text.rstrip() + "\n")
        self._err.flush()
