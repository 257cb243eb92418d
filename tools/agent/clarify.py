"""The clarify tool: the model asks the user a question mid-turn and waits for the answer.

The question goes out with a button per choice where the platform has buttons (numbered
text otherwise). The answer is a press (`cq:` buttons) or the asker's next typed message in
the session, caught by an admission middleware before it would be queued. Either can land on
any replica: the question lives in the store and the answer travels through a Rendezvous.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from gateway.sdk import (
    Admission,
    Button,
    ButtonPress,
    CallbackData,
    ChatKind,
    ChatRef,
    DeliveryError,
    EntrySigner,
    Extensions,
    Next,
    Outbound,
    Outbox,
    PressReply,
    Rendezvous,
    SentRef,
    Status,
    Store,
    Submission,
    ToolContext,
    ToolError,
    ToolFamily,
    ToolSpec,
    UserRef,
    finished,
    keys,
)
from tools.args import ToolArgs

log = logging.getLogger(__name__)

GROUP = "session"
EXPIRED = "This question has expired or was already answered."

Choice = Annotated[str, Field(min_length=1, max_length=80)]


class ClarifyArgs(ToolArgs):
    question: str = Field(min_length=1, max_length=1000)
    choices: list[Choice] = Field(
        default=[], max_length=8, description="Suggested short answers, shown as buttons."
    )


@dataclass(frozen=True)
class ClarifyChoice(CallbackData, prefix="cq"):
    """A choice button under a question: which question, which choice (by index)."""

    question_id: str
    index: int


class Question(BaseModel):
    """An open question as stored, so whichever replica gets the answer can check it."""

    id: str
    session: str
    chat: ChatRef
    asker: str  # platform:user_id
    asker_label: str
    text: str
    choices: list[str]
    answer_by: Literal["asker", "chat"]

    def may_answer(self, user: UserRef, chat: ChatRef) -> bool:
        if (chat.platform, chat.chat_id) != (self.chat.platform, self.chat.chat_id):
            return False
        return self.answer_by == "chat" or user.address == self.asker

    def choice(self, text: str) -> str:
        """A typed "2" picks the second choice; anything else is the answer as written."""
        text = text.strip()
        if text.isdigit() and 1 <= int(text) <= len(self.choices):
            return self.choices[int(text) - 1]
        return text


class ClarifyService(ToolFamily):
    """The clarify tool, the question buttons and the middleware that catches typed answers."""

    name = "clarify"

    def __init__(
        self,
        store: Store,
        outbox: Outbox,
        signer: EntrySigner,
        *,
        timeout: float = 300.0,
        answer_by: Literal["asker", "chat"] = "asker",
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._timeout = timeout
        self._answer_by = answer_by
        # Sealed: an answer a command wrote into the store is not taken for the person's.
        self._answers = Rendezvous(store, "clarify", signer, answer_ttl=timeout + 60)

    def register(self, extensions: Extensions) -> None:
        extensions.add_buttons(ClarifyChoice, self.on_press)
        # Typed answers are looked for only while a turn runs in the session.
        extensions.add_middleware("questions", self.on_message)

    async def close(self) -> None:
        await self._answers.close()

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="clarify",
                description=(
                    "Ask the user a question and wait for the answer, when you cannot go on "
                    "without it. Offer choices when the likely answers are few."
                ),
                args=ClarifyArgs,
                handler=self.ask,
                group=GROUP,
                # Waiting for a person is the point; the turn's own time limit still applies.
                timeout=self._timeout + 15,
            )
        ]

    # -- asking ------------------------------------------------------------------------

    async def ask(self, args: ClarifyArgs, ctx: ToolContext) -> str:
        if ctx.is_subagent:
            raise ToolError("a sub-agent cannot ask the user; put the question in your result.")
        if not self._outbox.has(ctx.chat.platform):
            raise ToolError("there is no one to ask in this context; decide yourself and say so.")
        question = Question(
            id=uuid.uuid4().hex[:12],
            session=str(ctx.session),
            chat=ctx.chat,
            asker=ctx.user.address,
            asker_label=ctx.user.label,
            text=args.question.strip(),
            choices=[c.strip() for c in args.choices if c.strip()],
            answer_by=self._answer_by,
        )
        ttl = self._timeout + 60
        open_key = _open_key(question.session)
        if not await self._store.set(open_key, question.id, ttl=ttl, only_if_absent=True):
            raise ToolError("another question is already waiting for an answer; ask one at a time.")
        try:
            await self._store.set(_question_key(question.id), question.model_dump_json(), ttl=ttl)
            # The streamed reply so far is finished first; it goes on below the question.
            async with ctx.stream.paused():
                sent = await self._send(question, ctx)
                async with ctx.typing.paused():
                    raw = await self._answers.wait(question.id, self._timeout)
        finally:
            await self._store.delete(open_key, _question_key(question.id))
        if raw is None:
            await self._mark_expired(sent, question)
            return (
                f"No answer: nobody answered within {self._timeout:.0f} s. Go on with a "
                "reasonable assumption and say which, or tell the user what you need."
            )
        answer = json.loads(raw)
        return f"{answer['by']} answered: {answer['text']}"

    async def _send(self, question: Question, ctx: ToolContext) -> SentRef:
        caps = self._outbox.capabilities(ctx.chat.platform)
        buttons = caps.buttons and bool(question.choices)
        text = question.text
        if ctx.chat.kind is not ChatKind.DIRECT and question.answer_by == "asker":
            text = f"Question for {question.asker_label}: {text}"
        if question.choices and not buttons:
            listed = "\n".join(f"{n}. {c}" for n, c in enumerate(question.choices, 1))
            text += f"\n\n{listed}\n\nReply with a number or your own answer."
        elif buttons:
            text += "\n\n(Tap a choice or type your own answer.)"
        try:
            return await self._outbox.send(
                Outbound(
                    chat=ctx.chat,
                    text=text,
                    buttons=_button_rows(question) if buttons else (),
                    reply_to=ctx.message_id,
                )
            )
        except DeliveryError as exc:
            raise ToolError(
                f"the question could not be delivered ({exc}); go on without it."
            ) from None

    async def _mark_expired(self, sent: SentRef, question: Question) -> None:
        if not self._outbox.capabilities(sent.chat.platform).can_edit:
            return
        try:
            await self._outbox.edit(
                sent, Outbound(chat=sent.chat, text=f"{question.text}\n\n(No answer in time.)")
            )
        except Exception as exc:  # cosmetic: the turn goes on either way
            log.debug("clarify expiry edit failed chat=%s error=%s", sent.chat.address, exc)

    # -- answers ---------------------------------------------------------------------------

    async def on_press(self, press: ButtonPress, data: ClarifyChoice) -> PressReply:
        question = await self._load(data.question_id)
        index = data.index
        if question is None or not 0 <= index < len(question.choices):
            return PressReply(toast=EXPIRED, alert=True)
        if not question.may_answer(press.user, press.chat):
            return PressReply(toast=f"Only {question.asker_label} can answer this.", alert=True)
        choice = question.choices[index]
        if not await self._answer(question, choice, press.user):
            return PressReply(toast=EXPIRED, alert=True)
        return PressReply(
            toast=f"Answered: {choice}",
            edit_text=f"{question.text}\n\n→ {choice} ({press.user.label})",
        )

    async def on_message(self, admission: Admission, call_next: Next) -> Submission:
        """Admission middleware: the asker's next message in the session is the answer."""
        inbound = admission.inbound
        stored = admission.intake.stored
        if stored is not None and stored.holder is None:
            # The session was idle, so no turn of it waits for an answer: a question is only
            # open while its turn runs. This saves a store read per message, and a question
            # left open by a process that died cannot swallow the next message.
            return await call_next(admission)
        question_id = await self._store.get(_open_key(str(admission.session)))
        question = None if question_id is None else await self._load(question_id)
        if question is not None and question.may_answer(inbound.sender, inbound.chat):
            answer = question.choice(inbound.text)
            if answer and await self._answer(question, answer, inbound.sender):
                return finished(Status.ANSWERED, session=admission.session)
        return await call_next(admission)

    async def _answer(self, question: Question, text: str, by: UserRef) -> bool:
        value = json.dumps({"text": text, "by": by.label}, ensure_ascii=False)
        return await self._answers.answer(question.id, value)

    async def _load(self, question_id: str) -> Question | None:
        raw = await self._store.get(_question_key(question_id))
        return None if raw is None else Question.model_validate_json(raw)


def _button_rows(question: Question) -> tuple[tuple[Button, ...], ...]:
    buttons = [
        Button(label=choice, data=ClarifyChoice(question.id, n).pack())
        for n, choice in enumerate(question.choices)
    ]
    if len(buttons) <= 3 and all(len(c) <= 20 for c in question.choices):
        return (tuple(buttons),)
    return tuple((b,) for b in buttons)


def _open_key(session: str) -> str:
    return keys.clarify_open(session)


def _question_key(question_id: str) -> str:
    return keys.clarify_question(question_id)
