"""Outbound messages as Bot Framework activities: Markdown text, cards for buttons, typing.

Teams renders a subset of Markdown in message text (`textFormat: markdown`); a message with
buttons is an Adaptive Card. Text longer than one message is split, and each part is its
own activity; the receipt is the last part's activity id.
"""

from __future__ import annotations

from microsoft_agents.activity import Activity, Attachment

from adapters.teams.cards import button_card
from adapters.teams.connector import TeamsConnector
from adapters.teams.normalize import conversation_id
from gateway.sdk import ChatRef, Outbound, SentRef, split_text

# Teams refuses activities over about 28 KB; Markdown text well under it leaves room for the
# envelope and for characters that take several bytes.
MAX_TEXT = 12_000


def text_activity(text: str) -> Activity:
    return Activity(type="message", text=text, text_format="markdown")


def card_activity(out: Outbound) -> Activity:
    card = button_card(out.text, out.buttons)
    return Activity(type="message", attachments=[Attachment.model_validate(card)])


class TeamsSender:
    def __init__(self, connector: TeamsConnector) -> None:
        self._connector = connector

    async def post(self, out: Outbound) -> SentRef:
        target = conversation_id(out.chat)
        parts = split_text(out.text, MAX_TEXT) if out.text else [""]
        last = ""
        for index, part in enumerate(parts):
            is_last = index == len(parts) - 1
            if is_last and out.buttons:
                activity = card_activity(out.model_copy(update={"text": part}))
            else:
                activity = text_activity(part)
            last = await self._connector.send(target, activity)
        return SentRef(chat=out.chat, message_id=last)

    async def update(self, ref: SentRef, out: Outbound) -> None:
        text = out.text if len(out.text) <= MAX_TEXT else split_text(out.text, MAX_TEXT)[0]
        edited = out.model_copy(update={"text": text})
        activity = card_activity(edited) if out.buttons else text_activity(text)
        activity.id = ref.message_id
        await self._connector.update(conversation_id(ref.chat), ref.message_id, activity)

    async def delete(self, ref: SentRef) -> None:
        await self._connector.delete(conversation_id(ref.chat), ref.message_id)

    async def typing(self, chat: ChatRef) -> None:
        await self._connector.send(conversation_id(chat), Activity(type="typing"))

    async def send_activity(self, chat: ChatRef, activity: Activity) -> SentRef:
        message_id = await self._connector.send(conversation_id(chat), activity)
        return SentRef(chat=chat, message_id=message_id)
