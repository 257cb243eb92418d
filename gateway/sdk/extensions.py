"""The one way a feature plugs into the core.

The composition root builds one `Extensions` and hands it to every feature and
platform while they are built. What they register here is what the core consults:

- `add_command`: a chat command (`/remind`, `/approve`), answered without the model;
- `add_middleware(slot, m)`: an admission middleware in a named slot, e.g. the answer to
  a question a running turn asked (`questions`), or a platform's reply to an unknown
  command (`fallback`);
- `add_access_rule`: a platform rule on who may talk to the bot;
- `add_prompt_section`: a part of the system prompt, rendered every turn (the skills index);
- `add_buttons`: the handler for presses of one kind of button (`CallbackData` class);
- `add_forget_hook`: what else `/forget` should offer to delete (a chat's workspace files);
- `add_stop_hook`: what else `/stop all` stops (background tasks, processes);
- `set_chat_files`: the same files for the operator console's /forget.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from gateway.intake.admission import Middleware
from gateway.sdk.callbacks import CallbackData, CallbackDataError, prefix_of
from gateway.sdk.messages import ButtonPress, ChatRef, Inbound, Outbound, PressReply
from gateway.sessions.key import SessionKey
from gateway.turn.prompt import PromptSection

# A rule returns None to let the message through, or one sentence for the person.
AccessRule = Callable[[Inbound], str | None]
# `questions`: consulted only while the session has a turn in progress (here or in another
# process), so ordinary messages cost nothing. `fallback`: last, before the session queue.
Slot = Literal["questions", "fallback"]
SLOTS: tuple[Slot, ...] = ("questions", "fallback")

C = TypeVar("C", bound=CallbackData)

EXPIRED_BUTTON = "This button has expired or is no longer valid."
INVALID_BUTTON = "This button is not valid."


@dataclass(frozen=True)
class CommandCall:
    inbound: Inbound
    session: SessionKey
    name: str  # as typed (an alias, perhaps)
    args: str


@dataclass(frozen=True)
class CommandReply:
    """A command's answer with more messages after it (an offer with buttons, ...)."""

    text: str
    follow_ups: tuple[Outbound, ...] = ()


CommandHandler = Callable[[CommandCall], Awaitable[str | CommandReply | None]]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    handler: CommandHandler
    aliases: tuple[str, ...] = ()


PressHandler = Callable[[ButtonPress], Awaitable[PressReply]]
# Called for `/stop all` after the running request was stopped; it stops more (background
# tasks, processes) and says what, or returns None when it had nothing to stop.
StopHook = Callable[[CommandCall], Awaitable[str | None]]
# Called after /forget deleted the chat's history and notes; it may offer more (a message sent
# after /forget's answer).
ForgetHook = Callable[[CommandCall], Awaitable[Outbound | None]]


class ChatFiles(Protocol):
    """Files a chat keeps outside the store (its workspace folder), for the operator console
    to delete with /forget, as the chat offers its sender (tools/files/wipe.py)."""

    def held(self, chat: ChatRef) -> str | None:
        """What the chat's folder holds ("3 file(s), 12 KB"); None: nothing, or shared."""
        ...

    def wipe(self, chat: ChatRef) -> str:
        """Delete the chat's files; says what was deleted."""
        ...


class Extensions:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}
        self._middlewares: dict[Slot, list[Middleware]] = {slot: [] for slot in SLOTS}
        self.access_rules: list[AccessRule] = []
        self.prompt_sections: list[PromptSection] = []
        self._presses: dict[str, PressHandler] = {}
        self.forget_hooks: list[ForgetHook] = []
        self.stop_hooks: list[StopHook] = []
        self.chat_files: ChatFiles | None = None

    # -- registering -------------------------------------------------------------------

    def add_command(self, command: Command) -> None:
        for name in (command.name, *command.aliases):
            if name in self._commands:
                raise ValueError(f"the command /{name} is registered twice")
            self._commands[name] = command

    def add_middleware(self, slot: Slot, middleware: Middleware) -> None:
        self._middlewares[slot].append(middleware)

    def add_access_rule(self, rule: AccessRule) -> None:
        self.access_rules.append(rule)

    def add_prompt_section(self, section: PromptSection) -> None:
        self.prompt_sections.append(section)

    def add_forget_hook(self, hook: ForgetHook) -> None:
        self.forget_hooks.append(hook)

    def add_stop_hook(self, hook: StopHook) -> None:
        self.stop_hooks.append(hook)

    def set_chat_files(self, files: ChatFiles) -> None:
        self.chat_files = files

    def add_buttons(
        self, kind: type[C], handler: Callable[[ButtonPress, C], Awaitable[PressReply]]
    ) -> None:
        """Route presses of buttons whose data is a packed `kind` to `handler`."""
        if kind.prefix in self._presses:
            raise ValueError(f"the button prefix {kind.prefix!r} is registered twice")

        async def route(press: ButtonPress) -> PressReply:
            try:
                data = kind.unpack(press.data)
            except CallbackDataError:
                return PressReply(toast=INVALID_BUTTON, alert=True)
            return await handler(press, data)

        self._presses[kind.prefix] = route

    # -- consulting ------------------------------------------------------------------------

    def command(self, name: str) -> Command | None:
        return self._commands.get(name)

    @property
    def commands(self) -> list[Command]:
        """Each command once (aliases share it), in registration order."""
        return list({id(c): c for c in self._commands.values()}.values())

    def middlewares(self, slot: Slot) -> list[Middleware]:
        return self._middlewares[slot]

    async def press(self, press: ButtonPress) -> PressReply:
        """Route a button press by its data's prefix; unknown buttons get a clear toast."""
        handler = self._presses.get(prefix_of(press.data))
        if handler is None:
            return PressReply(toast=EXPIRED_BUTTON, alert=True)
        return await handler(press)
