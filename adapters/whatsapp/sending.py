"""Delivering Outbound messages to one number, within WhatsApp's 24-hour window or by template.

Inside the window a message goes as text, buttons or media. Outside it (by our record, or
because WhatsApp answered 131047) it goes as the configured template; without one it is
refused as a permanent DeliveryError that says why, which the scheduler records as a failed
run in the console and the log; nothing is dropped silently.
"""

from __future__ import annotations

import logging

from adapters.whatsapp import messages
from adapters.whatsapp.files import WhatsAppMedia
from adapters.whatsapp.graph import OUTSIDE_WINDOW, GraphClient, GraphError
from adapters.whatsapp.normalize import direct_chat
from adapters.whatsapp.resend import SentMessages
from adapters.whatsapp.settings import WhatsAppTemplate
from adapters.whatsapp.window import CustomerWindows
from gateway.sdk import DeliveryError, Outbound, SentRef

log = logging.getLogger(__name__)

UNDELIVERABLE = (
    "WhatsApp allows free-form messages only within 24 hours of the person's last message, "
    "and no template is configured (whatsapp.templates.name)"
)


class WindowClosed(DeliveryError):
    """Outside the 24-hour window with no template: WhatsApp would refuse the message."""

    def __init__(self) -> None:
        super().__init__(UNDELIVERABLE, permanent=True)


class WhatsAppSender:
    def __init__(
        self,
        graph: GraphClient,
        media: WhatsAppMedia,
        windows: CustomerWindows,
        sent: SentMessages,
        *,
        phone_number_id: str,
        template: WhatsAppTemplate,
    ) -> None:
        self._graph = graph
        self._media = media
        self._windows = windows
        self._sent = sent
        self._path = f"{phone_number_id}/messages"
        self._template = template

    async def send(self, out: Outbound) -> SentRef:
        """Returns the receipt of the last message sent (a reply may take several)."""
        number = out.chat.chat_id
        if not await self._windows.is_open(number):
            return await self._outside_window(out)
        try:
            return await self._free_form(out)
        except GraphError as exc:
            if exc.code != OUTSIDE_WINDOW:
                raise
            await self._windows.closed(number)
            return await self._outside_window(out)

    async def post(self, body: messages.Body) -> str:
        """One message request; returns WhatsApp's message id (wamid)."""
        result = await self._graph.post(self._path, body)
        sent = result.get("messages")
        message_id = ""
        if isinstance(sent, list) and sent and isinstance(sent[0], dict):
            message_id = str(sent[0].get("id") or "")
        if body.get("type") != "template":
            await self._sent.remember(message_id, body)
        return message_id

    async def window_refused(self, message_id: str) -> None:
        """WhatsApp reported a free-form message failed outside the window (131047): it goes
        again as the template, or is logged as undeliverable."""
        found = await self._sent.take(message_id)
        if found is None:
            return
        number, text = found
        chat = direct_chat(number)
        await self._windows.closed(number)
        await self._outside_window(Outbound(chat=chat, text=text, markdown=False))

    async def mark_read(self, message_id: str, *, typing: bool) -> None:
        await self._graph.post(self._path, messages.read_receipt(message_id, typing))

    async def _free_form(self, out: Outbound) -> SentRef:
        number = out.chat.chat_id
        text = messages.render(out.text, out.markdown) if out.text.strip() else ""
        message_id = ""
        reply_to = out.reply_to
        if out.attachments:
            message_id, text_sent = await self._send_files(out, text)
            text, reply_to = ("" if text_sent else text), None
        buttons = [b for row in out.buttons for b in row]
        if buttons:
            bodies = messages.button_bodies(number, text or messages.CHOOSE, buttons, reply_to)
        elif text or not message_id:
            bodies = messages.text_bodies(number, text or "…", reply_to)
        else:
            bodies = []
        for body in bodies:
            message_id = await self.post(body)
        return SentRef(chat=out.chat, message_id=message_id)

    async def _send_files(self, out: Outbound, text: str) -> tuple[str, bool]:
        """Each file uploaded, then sent; the text is the caption of the first file that
        takes one (audio does not). Returns the last message id, and whether the text went
        out (as a caption, or first as a message when too long for one)."""
        caption = text if len(text) <= messages.MAX_CAPTION else ""
        text_sent = False
        if not caption and text:
            # Too long for a caption: it goes first as text, the files after it.
            for body in messages.text_bodies(out.chat.chat_id, text, out.reply_to):
                await self.post(body)
            text_sent = True
        message_id = ""
        for n, file in enumerate(out.attachments):
            kind = messages.media_type(file)
            media_id = await self._media.upload(file)
            this_caption = caption if kind != "audio" else ""
            body = messages.media_body(
                out.chat.chat_id,
                kind,
                media_id,
                file,
                this_caption,
                out.reply_to if n == 0 else None,
            )
            message_id = await self.post(body)
            if this_caption:
                caption, text_sent = "", True
        return message_id, text_sent

    async def _outside_window(self, out: Outbound) -> SentRef:
        number = out.chat.chat_id
        template = self._template
        if not template.name:
            log.warning(
                "whatsapp message undeliverable: outside the 24-hour window, no template chat=%s",
                out.chat.address,
            )
            raise WindowClosed()
        text = messages.render(out.text, out.markdown) if out.text.strip() else ""
        if out.attachments:
            names = ", ".join(f.name for f in out.attachments)
            text = f"{text} [files not sent outside the 24-hour window: {names}]".strip()
        body = messages.template_body(number, template.name, template.language, text)
        message_id = await self.post(body)
        log.info(
            "whatsapp message sent as template outside the 24-hour window chat=%s template=%s",
            out.chat.address,
            template.name,
        )
        return SentRef(chat=out.chat, message_id=message_id)
