"""Built-in chat commands answered by the gateway itself, never by the model."""

from __future__ import annotations

from gateway.intake.access import AccessPolicy
from gateway.sdk.extensions import Command, CommandCall, CommandReply, Extensions
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sessions.history import SessionStore
from gateway.sessions.key import SessionKey
from gateway.sessions.queue import SessionQueue, StopResult
from gateway.turn.memory import MemoryBook, MemoryScope

MODERATORS_ONLY = (
    "In a group, only an admin can use /{name}: it affects everyone's conversation here."
)
NOT_YOURS = "Only the person who asked, or an admin, can stop the request I am working on."


async def new_conversation(
    queue: SessionQueue, sessions: SessionStore, session: SessionKey
) -> StopResult:
    """/new: stop the session's running request, drop what waits, and clear its history."""
    stopped = await queue.stop_session(session)
    await sessions.clear(session)
    return stopped


async def forget_chat(
    queue: SessionQueue,
    sessions: SessionStore,
    memory: MemoryBook,
    session: SessionKey,
    chat: ChatRef,
    user: UserRef,
) -> int:
    """/forget: stop the session, delete every conversation of its chat and the chat's notes
    (personal notes are kept); returns how many conversations were deleted."""
    await queue.stop_session(session)
    cleared = await sessions.clear_chat(session.chat_scope)
    await sessions.clear(session)
    await memory.forget_chat(chat, user)
    return cleared


async def _dead_letter_line(queue: SessionQueue, session: SessionKey) -> str:
    letters = [d for d in await queue.dead_letters.list() if d.session == str(session)]
    if not letters:
        return ""
    return (
        f"\nMessages set aside after failing every attempt: {len(letters)} "
        "(the operator can retry them: chatgate dead-letters)."
    )


def register_builtin_commands(
    extensions: Extensions,
    queue: SessionQueue,
    sessions: SessionStore,
    memory: MemoryBook,
    access: AccessPolicy,
) -> None:
    def moderates(call: CommandCall) -> bool:
        return access.may_moderate(call.inbound.sender, call.inbound)

    async def new(call: CommandCall) -> str:
        # A person's own session (isolation "user") is theirs to reset.
        if call.session.user_id is None and not moderates(call):
            return MODERATORS_ONLY.format(name=call.name)
        stopped = await new_conversation(queue, sessions, call.session)
        note = " (the running request was stopped)" if stopped.running_here else ""
        return f"Started a new conversation{note}. What can I do for you?"

    async def stop(call: CommandCall) -> str:
        sender = call.inbound.sender
        anyone = access.is_admin(sender) or access.may_moderate(sender, call.inbound)
        everything = call.args.strip().lower() == "all"
        if everything and not anyone:
            return MODERATORS_ONLY.format(name="stop all")
        stopped = await queue.stop_session(call.session, by=None if anyone else sender)
        if stopped.refused:
            return NOT_YOURS
        if everything:
            more = [line for hook in extensions.stop_hooks if (line := await hook(call))]
            head = "Stopped." if stopped.running_here else "Nothing was answering."
            return " ".join([head, *more]) if more else f"{head} Nothing else was running."
        if stopped.dropped:
            return f"Stopped. {stopped.dropped} waiting message(s) were dropped as well."
        return (
            "Stopped."
            if stopped.running_here
            else "Nothing is running; if something was, it has been told to stop."
        )

    async def help_(call: CommandCall) -> str:
        lines = ["I am an assistant: write to me in plain words. Commands:"]
        for command in sorted(extensions.commands, key=lambda c: c.name):
            lines.append(f"/{command.name} - {command.help}")
        return "\n".join(lines)

    async def status(call: CommandCall) -> str:
        record = await sessions.load(call.session)
        state = "running a request" if queue.is_running(call.session) else "idle"
        summary = (
            f"Summary of {record.summary_turns} earlier turn(s): {len(record.summary):,} "
            f"characters (~{len(record.summary) // 4:,} tokens).\n"
            if record.summary
            else ""
        )
        loaded = f"Tools loaded: {', '.join(record.tools_loaded)}.\n" if record.tools_loaded else ""
        return (
            f"Session {call.session}: {state}.\n"
            f"Messages in history: {len(record.messages)}; turns: {record.turns}.\n"
            f"{summary}{loaded}"
            f"Tokens used: {record.prompt_tokens + record.completion_tokens:,} "
            f"({record.prompt_tokens:,} prompt, {record.completion_tokens:,} completion).\n"
            f"Waiting messages: {await queue.waiting(call.session)}."
            f"{await _dead_letter_line(queue, call.session)}"
        )

    async def show_memory(call: CommandCall) -> str:
        notes = await memory.notes(call.inbound.chat, call.inbound.sender)
        if not notes.chat and not notes.user:
            return "I have no notes yet. Ask me to remember something."
        lines = []
        for scope, items in ((MemoryScope.CHAT, notes.chat), (MemoryScope.USER, notes.user)):
            if items:
                used = sum(len(n) for n in items)
                lines.append(f"{scope.value} notes ({used}/{memory.budget(scope)} characters):")
                lines.extend(f"- {n}" for n in items)
        return "\n".join(lines)

    async def forget(call: CommandCall) -> str | CommandReply:
        if not moderates(call):
            return MODERATORS_ONLY.format(name=call.name)
        inbound = call.inbound
        cleared = await forget_chat(
            queue, sessions, memory, call.session, inbound.chat, inbound.sender
        )
        offers = [offer for hook in extensions.forget_hooks if (offer := await hook(call))]
        return CommandReply(
            f"Forgot this chat: {max(cleared, 1)} conversation(s) and the chat's notes were "
            "deleted. Your personal notes are kept.",
            tuple(offers),
        )

    for command in (
        Command("new", "start a new conversation (forget the current one)", new, ("reset",)),
        Command(
            "stop",
            "stop the request I am working on (/stop all: also background tasks and processes)",
            stop,
        ),
        Command("help", "show this help", help_, ("start",)),
        Command("status", "show this conversation's size, token use and queue", status),
        Command("memory", "show what I remember about this chat and you", show_memory),
        Command("forget", "delete this chat's history and notes", forget),
    ):
        extensions.add_command(command)
