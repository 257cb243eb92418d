"""One /sync response into the gateway: invites answered, messages handed to admission,
reactions turned into presses; taken only once every message is stored.

A message counts as taken when admission has stored, answered, refused or dropped it
(`submit` returned); one whose store was unreachable is not, and then the whole response is
not taken: the sync token stays where it was and the same events come again (admission
deduplicates on the event id). Rooms are taken concurrently, each room's events in order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nio import (
    AsyncClient,
    EncryptionError,
    Event,
    InviteMemberEvent,
    MatrixRoom,
    MegolmEvent,
    ReactionEvent,
    RoomGetEventResponse,
    SyncResponse,
)

from adapters.matrix.access import MatrixAccess
from adapters.matrix.normalize import PLATFORM, BotIdentity, chat_ref, inbound_from, relation_of
from adapters.matrix.sending import MatrixSender
from gateway.sdk import (
    AdapterContext,
    ButtonPress,
    ChatKind,
    DeliveryError,
    Inbound,
    Outbound,
    SentRef,
    Status,
    Store,
    StoreUnavailable,
    UserRef,
    keys,
)

log = logging.getLogger(__name__)

PressHandler = Callable[[ButtonPress], Awaitable[None]]
UNDECRYPTABLE = (
    "I could not decrypt that message: my device did not get its key. Please send it again; "
    "if this keeps happening, check that your client shares keys with unverified devices."
)


class SyncIntake:
    def __init__(
        self,
        ctx: AdapterContext,
        client: AsyncClient,
        sender: MatrixSender,
        access: MatrixAccess,
        *,
        me: BotIdentity,
        group_context: bool,
        read_receipts: bool,
        pressed: Callable[[str, str], Awaitable[str | None]],
        on_press: PressHandler,
        spawn: Callable[[Awaitable[None]], None],
    ) -> None:
        self._ctx = ctx
        self._client = client
        self._sender = sender
        self._access = access
        self._me = me
        self._group_context = group_context
        self._read_receipts = read_receipts
        self._pressed = pressed
        self._on_press = on_press
        self._spawn = spawn

    async def invites(self, response: SyncResponse) -> None:
        """Join rooms an allowed person invited the bot to; decline the others."""
        for room_id, info in response.rooms.invite.items():
            inviter = next(
                (
                    event.sender
                    for event in info.invite_state
                    if isinstance(event, InviteMemberEvent)
                    and event.state_key == self._me.user_id
                    and event.membership == "invite"
                ),
                None,
            )
            if inviter is None:
                continue
            if self._access.accepts_invite(inviter, room_id):
                joined = await self._client.join(room_id)
                log.info(
                    "matrix invite accepted room=%s inviter=%s result=%s",
                    room_id,
                    inviter,
                    type(joined).__name__,
                )
            else:
                await self._client.room_leave(room_id)
                log.info("matrix invite declined room=%s inviter=%s", room_id, inviter)

    async def take(self, response: SyncResponse) -> bool:
        """Hand every new message of `response` to admission; False if one was not stored."""
        await self.invites(response)
        lanes = [
            self._take_room(room_id, list(info.timeline.events))
            for room_id, info in response.rooms.join.items()
            if info.timeline.events
        ]
        results = await asyncio.gather(*lanes)
        return all(results)

    async def _take_room(self, room_id: str, events: list[Event]) -> bool:
        room = self._client.rooms.get(room_id)
        for event in events:
            if isinstance(event, MegolmEvent):
                event = self._decrypted(event, room_id)
                if isinstance(event, MegolmEvent):
                    await self._undecryptable(event, room_id, room)
                    continue
            if isinstance(event, ReactionEvent):
                await self._reaction(event, room_id, room)
                continue
            if not await self._take_message(event.source, room_id, room):
                return False  # the rest of this room waits for the redelivery, in order
        return True

    def _decrypted(self, event: MegolmEvent, room_id: str) -> Event:
        try:
            return self._client.decrypt_event(event)
        except EncryptionError as exc:
            # The sender's client did not share the room key with this device.
            log.warning(
                "matrix event not decrypted room=%s event=%s error=%s", room_id, event.event_id, exc
            )
            return event

    async def _undecryptable(
        self, event: MegolmEvent, room_id: str, room: MatrixRoom | None
    ) -> None:
        """Say once that a message could not be read: silence would look like a bot that
        ignores people."""
        if event.sender == self._me.user_id:
            return
        try:
            first = await self._ctx.store.set(
                keys.seen("matrix-undecryptable", event.event_id),
                "1",
                ttl=86400,
                only_if_absent=True,
            )
        except StoreUnavailable:
            return  # the same event comes again with the rest of the response
        if not first:
            return
        chat = chat_ref(room_id, direct=_direct(room))
        notice = Outbound(chat=chat, text=UNDECRYPTABLE, reply_to=event.event_id, markdown=False)
        self._spawn(self._send_quietly(notice))

    async def _send_quietly(self, out: Outbound) -> None:
        try:
            await self._sender.send(out)
        except DeliveryError as exc:
            log.info("matrix notice not sent room=%s error=%s", out.chat.chat_id, exc)

    async def _take_message(
        self, source: dict[str, Any], room_id: str, room: MatrixRoom | None
    ) -> bool:
        direct = _direct(room)
        sender = source.get("sender")
        name = room.user_name(sender) if room is not None and isinstance(sender, str) else None
        inbound = inbound_from(source, room_id, self._me, direct=direct, sender_name=name)
        if inbound is None:
            return True
        if not inbound.mentioned:
            inbound = await self._addressed_anyway(inbound, source)
        if not self._wanted(inbound):
            return True
        try:
            result = await self._ctx.submit(inbound)
        except Exception:
            log.exception("matrix event not taken room=%s event=%s", room_id, inbound.event_id)
            return False
        if result.status is Status.UNAVAILABLE:
            return False
        if self._read_receipts and inbound.mentioned:
            self._spawn(self._sender.receipt(room_id, inbound.event_id, inbound.chat.thread_id))
        return True

    async def _addressed_anyway(self, inbound: Inbound, source: dict[str, Any]) -> Inbound:
        """A room message without a mention is still for the bot when it replies to the bot
        or is in a thread the bot answered in."""
        content = source.get("content")
        relation = relation_of(content if isinstance(content, dict) else {})
        chat = inbound.chat
        addressed = False
        if chat.thread_id and await self._in_thread(chat.chat_id, chat.thread_id):
            addressed = True
        elif relation.reply_to:
            found = await self._client.room_get_event(chat.chat_id, relation.reply_to)
            addressed = (
                isinstance(found, RoomGetEventResponse) and found.event.sender == self._me.user_id
            )
        return inbound.model_copy(update={"mentioned": True}) if addressed else inbound

    async def _in_thread(self, room_id: str, root: str) -> bool:
        try:
            return (
                await self._ctx.store.get(keys.platform_thread(PLATFORM, room_id, root)) is not None
            )
        except StoreUnavailable:
            return False

    def _wanted(self, inbound: Inbound) -> bool:
        """Unaddressed room chatter goes to admission only as context, and only if allowed."""
        if inbound.chat.kind is ChatKind.DIRECT or inbound.mentioned or inbound.is_command:
            return True
        # A refusal for chatter nobody addressed to the bot would be noise.
        return self._group_context and self._access.allows(
            inbound.sender.user_id, inbound.chat.chat_id
        )

    async def _reaction(self, event: ReactionEvent, room_id: str, room: MatrixRoom | None) -> None:
        if event.sender == self._me.user_id:
            return
        try:
            data = await self._pressed(event.reacts_to, event.key)
        except StoreUnavailable as exc:
            log.warning("matrix reaction not read room=%s error=%s", room_id, exc)
            return
        if data is None:
            return  # a reaction to something that is not a prompt
        chat = chat_ref(room_id, direct=_direct(room))
        name = room.user_name(event.sender) if room is not None else None
        press = ButtonPress(
            event_id=event.event_id,
            chat=chat,
            user=UserRef(platform=PLATFORM, user_id=event.sender, display_name=name or None),
            data=data,
            message=SentRef(chat=chat, message_id=event.reacts_to),
        )
        # A press is answered on its own; the decision it makes is stored by the core.
        self._spawn(self._on_press(press))


def _direct(room: MatrixRoom | None) -> bool:
    """A room of the bot and one person is their direct chat (whatever m.direct says)."""
    return room is not None and room.member_count <= 2


async def remember_thread(store: Store, room_id: str, root: str, ttl: float) -> None:
    try:
        await store.set(keys.platform_thread(PLATFORM, room_id, root), "1", ttl=ttl)
    except StoreUnavailable as exc:
        log.warning("matrix thread not remembered room=%s error=%s", room_id, exc)
