"""Files sent natively through the Bot API: photos (sendPhoto), voice notes (sendVoice), audio
(sendAudio) and everything else as documents (sendDocument), with the text as caption.

Telegram's rules decide the method: a photo is a JPEG, PNG or WebP of at most 10 MB whose
sides add up to at most 10,000 px (in a ratio up to 20); sendAudio takes MP3 and M4A; a voice
note is OGG/Opus (or MP3, M4A). Whatever breaks a rule goes as a document, never refused.
"""

from __future__ import annotations

from typing import Any

from telegram import Bot, InputFile, Message, ReplyParameters
from telegram.constants import ParseMode

from adapters.telegram.render import Part, render_parts
from adapters.telegram.sending import TelegramSender
from gateway.sdk import AttachmentKind, ChatKind, ChatRef, Outbound, OutboundFile, SentRef
from gateway.sdk.media import image_size

MAX_UPLOAD_BYTES = 50_000_000  # Bot API multipart uploads
CAPTION_LIMIT = 1024
_PHOTO_BYTES = 10_000_000
_PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})
_AUDIO_TYPES = frozenset({"audio/mpeg", "audio/mp4"})
_VOICE_TYPES = frozenset({"audio/ogg", "audio/mpeg", "audio/mp4"})


class TelegramUploads:
    def __init__(self, bot: Bot, sender: TelegramSender) -> None:
        self._bot = bot
        self._sender = sender

    async def send(self, out: Outbound) -> SentRef:
        """Each file as its own message; the text is the first file's caption, or a message
        of its own before them when it is longer than a caption may be."""
        chat = out.chat
        reply_to = out.reply_to if chat.kind is not ChatKind.DIRECT else None
        if reply_to is not None and not reply_to.isdigit():
            reply_to = None
        caption: Part | None = None
        if out.text.strip():
            parts = render_parts(out.text, markdown=out.markdown, limit=CAPTION_LIMIT)
            if len(parts) == 1:
                caption = parts[0]
            else:
                text = out.model_copy(update={"attachments": (), "buttons": ()})
                await self._sender.send(text)
                reply_to = None
        sent: Message | None = None
        for file in out.attachments:
            sent = await self._send_file(chat, file, caption, reply_to)
            caption, reply_to = None, None
        assert sent is not None, "an upload needs at least one file"
        return SentRef(chat=chat, message_id=str(sent.message_id))

    async def _send_file(
        self, chat: ChatRef, file: OutboundFile, caption: Part | None, reply_to: str | None
    ) -> Message:
        method = upload_method(file)
        reply = (
            ReplyParameters(int(reply_to), allow_sending_without_reply=True) if reply_to else None
        )
        thread = int(chat.thread_id) if chat.thread_id else None
        sent: list[Message] = []

        async def attempt(text: str, html: bool) -> None:
            upload = InputFile(file.data, filename=file.name)
            common: dict[str, Any] = {
                "caption": text or None,
                "parse_mode": ParseMode.HTML if html and text else None,
                "message_thread_id": thread,
                "reply_parameters": reply,
            }
            if method == "photo":
                message = await self._bot.send_photo(chat.chat_id, upload, **common)
            elif method == "voice":
                message = await self._bot.send_voice(chat.chat_id, upload, **common)
            elif method == "audio":
                message = await self._bot.send_audio(chat.chat_id, upload, **common)
            else:
                message = await self._bot.send_document(chat.chat_id, upload, **common)
            sent.append(message)

        await self._sender.call(chat, caption or Part("", "", False), attempt)
        return sent[-1]


def upload_method(file: OutboundFile) -> str:
    """ "photo", "voice", "audio" or "document", by Telegram's rules for each."""
    if file.kind is AttachmentKind.IMAGE and _fits_photo(file):
        return "photo"
    if file.kind is AttachmentKind.VOICE and file.mime_type in _VOICE_TYPES:
        return "voice"
    if file.kind in (AttachmentKind.AUDIO, AttachmentKind.VOICE) and file.mime_type in _AUDIO_TYPES:
        return "audio"
    return "document"


def _fits_photo(file: OutboundFile) -> bool:
    if file.mime_type not in _PHOTO_TYPES or file.size > _PHOTO_BYTES:
        return False
    size = image_size(file.data)
    if size is None:
        return False
    width, height = size
    return width + height <= 10_000 and max(width, height) <= 20 * max(1, min(width, height))
