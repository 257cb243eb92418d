"""What a turn does with the files a person sent, before and after the model runs.

Everything is fetched here, inside the turn, so only messages that passed admission (access,
rate limit) ever cause a download. Images go to the model as image parts (llm.vision), voice
notes and audio are transcribed (stt), and with `tts.reply_with_voice` the answer is also
spoken. A file that cannot be used costs one clear line to the person and one log line;
when nothing usable is left, that line is the answer and the model is not asked.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.approvals.untrusted import wrap
from gateway.config import Settings
from gateway.llm.images import image_part, text_part
from gateway.llm.types import Message
from gateway.llm.vision import Vision
from gateway.media.content import CONTEXT_SOURCE, note, recent_images, user_text
from gateway.media.documents import DocumentError, document_kind, extract, may_be_document
from gateway.media.fetch import fetch
from gateway.media.images import ImageError, PreparedImage, prepare_image
from gateway.media.services import (
    MediaClient,
    MediaServiceError,
    Speaker,
    Transcriber,
    endpoint,
)
from gateway.media.sniff import safe_name, sniff
from gateway.media.speech_text import speakable
from gateway.sdk.channels import AttachmentError, AttachmentUnavailable, DeliveryError, Outbox
from gateway.sdk.messages import Attachment, AttachmentKind, Inbound, Outbound, OutboundFile

log = logging.getLogger(__name__)

NO_VISION = "This AI model cannot see images, so I can only go by your text."
NO_STT = "I cannot listen to voice messages here; please type your message."
_MAX_ATTACHMENTS = 10  # per message; more are noted but not fetched
# Words by which a person points back at an image sent earlier ("what does the chart say?").
_REFERS = re.compile(
    r"\b(images?|pictures?|photos?|pics?|screenshots?|screen ?shots?|charts?|graphs?|"
    r"diagrams?|whiteboards?|drawings?|sketch(es)?|figures?|scans?|slides?|"
    r"fotos?|bild(er)?|imagen(es)?)\b",
    re.IGNORECASE,
)


@dataclass
class PreparedInput:
    """The person's message for history (`text`: references only) and for the model."""

    text: str
    images: list[PreparedImage] = field(default_factory=list)
    model_lines: list[str] = field(default_factory=list)  # for this request only
    # Outside content the model reads with the message ("file report.pdf", "chat messages").
    outside: tuple[str, ...] = ()
    notices: list[str] = field(default_factory=list)  # told to the person before the answer
    answer: str | None = None  # set: nothing usable for the model; this line is the answer
    voice: bool = False  # the person spoke (tts.reply_with_voice = when_voice)
    told_no_vision: bool = False
    vision: Vision | None = None  # the turn's model's, when it is not the default one

    def request(self, history: list[Message]) -> list[Message]:
        """`history` (ending with this message as stored) as the model gets it this turn."""
        if not self.images and not self.model_lines:
            return history
        content = "\n\n".join([self.text, *self.model_lines])
        if not self.images:
            return [*history[:-1], {"role": "user", "content": content}]
        parts: list[dict[str, Any]] = [text_part(content)]
        parts.extend(image_part(image.data_url()) for image in self.images)
        return [*history[:-1], {"role": "user", "content": parts}]


class TurnMedia:
    """The turn's hooks: `prepare` before the model, `before_reply`, `after_reply`."""

    def __init__(
        self,
        *,
        settings: Settings,
        outbox: Outbox,
        vision: Vision,
        transcriber: Transcriber | None,
        speaker: Speaker | None,
    ) -> None:
        self._settings = settings
        self._media = settings.media
        self._outbox = outbox
        self._vision = vision
        self._transcriber = transcriber
        self._speaker = speaker

    def may_show_images(self, vision: Vision | None) -> bool:
        """Whether images from tool results go to the turn's model (`vision`: its model's,
        when not the default one): unless llm.vision is off or the model refused images."""
        return (vision or self._vision).accepts_images is not False

    async def prepare(
        self,
        inbound: Inbound,
        context_lines: Sequence[str],
        history: Sequence[Message],
        vision: Vision | None = None,
    ) -> PreparedInput:
        """The message with its files turned into what the model can use; never raises for
        a file (each failure is a notice and a note). `vision` is the turn's model's (its
        profile's), when not the default model's."""
        lines = [user_text(inbound, context_lines)]
        said = [inbound.text]  # the person's own words, transcripts included
        prepared = PreparedInput(text="", vision=vision)
        if context_lines:
            # Other people's messages (a Slack thread, a group's chatter) may ask for things
            # the person did not: the turn starts after outside content, as with a document.
            prepared.outside = (CONTEXT_SOURCE,)
        usable = bool(inbound.text.strip())
        for index, attachment in enumerate(inbound.attachments):
            lines.append(note(attachment))
            if index >= _MAX_ATTACHMENTS:
                continue
            if attachment.kind is AttachmentKind.IMAGE:
                usable = await self._image(inbound, attachment, prepared) or usable
            elif attachment.kind in (AttachmentKind.VOICE, AttachmentKind.AUDIO):
                heard = await self._speech(inbound, attachment, prepared)
                if heard is not None:
                    lines.append(heard)
                    said.append(heard)
                    usable = True
            else:
                await self._document(inbound, attachment, prepared)
                usable = True  # a document: its text, or the model can save and read it
        sent_images = any(a.kind is AttachmentKind.IMAGE for a in inbound.attachments)
        if not sent_images and self._refers_back("\n".join(said)):
            await self._earlier_images(inbound, history, prepared)
        prepared.text = "\n\n".join(line for line in lines if line.strip())
        if not usable and prepared.notices:
            prepared.answer = "\n".join(prepared.notices)
            prepared.notices = []
        return prepared

    async def before_reply(self, inbound: Inbound, prepared: PreparedInput) -> None:
        """Notices due before the answer: files that could not be used, the transcript, and
        (with llm.vision = auto) that the model turned out not to see images."""
        if (
            prepared.images
            and (prepared.vision or self._vision).accepts_images is False
            and not self._settings.llm.vision_model
            and not prepared.told_no_vision
        ):
            prepared.notices.append(NO_VISION)
        for line in prepared.notices:
            await self._say(inbound, line)
        prepared.notices = []

    async def after_reply(self, inbound: Inbound, prepared: PreparedInput, reply: str) -> None:
        """The answer spoken too, as `tts.reply_with_voice` asks."""
        mode = self._settings.tts.reply_with_voice
        if self._speaker is None or mode == "off" or (mode == "when_voice" and not prepared.voice):
            return
        if not self._uploads_to(inbound):
            return
        text = speakable(reply)
        if not text:
            return
        try:
            speech = await self._speaker.speak(text)
        except MediaServiceError as exc:
            log.warning("voice reply failed chat=%s error=%s", inbound.chat.address, exc)
            return
        voice = OutboundFile(
            kind=AttachmentKind.VOICE, name="reply.ogg", mime_type=speech.mime, data=speech.data
        )
        try:
            await self._outbox.send(
                Outbound(
                    chat=inbound.chat, text="", attachments=(voice,), reply_to=inbound.message_id
                )
            )
        except DeliveryError as exc:
            log.warning("voice reply not delivered chat=%s error=%s", inbound.chat.address, exc)

    # -- images -------------------------------------------------------------------------

    async def _image(
        self, inbound: Inbound, attachment: Attachment, prepared: PreparedInput
    ) -> bool:
        """Add the image for the model (or say why not); True when the model can use it."""
        vision = prepared.vision or self._vision
        if vision.accepts_images is False:
            prepared.model_lines.append(vision.note)
            if self._settings.llm.vision_model:
                return True  # vision_analyze can look at it
            if not prepared.told_no_vision:
                prepared.notices.append(NO_VISION)
                prepared.told_no_vision = True
            return False
        if len(prepared.images) >= self._media.max_images:
            prepared.model_lines.append(
                f"[{attachment.name or 'an image'} not shown: at most "
                f"{self._media.max_images} images go to you at once]"
            )
            return True
        try:
            image = await self._load_image(inbound, attachment)
        except (AttachmentError, ImageError) as exc:
            self._failed(inbound, attachment, exc)
            prepared.notices.append(f"I could not open your image{_called(attachment)}: {exc}.")
            prepared.model_lines.append(f"[image {attachment.file_id} could not be shown: {exc}]")
            return False
        prepared.images.append(image)
        return True

    async def _earlier_images(
        self, inbound: Inbound, history: Sequence[Message], prepared: PreparedInput
    ) -> None:
        if (prepared.vision or self._vision).accepts_images is False:
            return
        earlier = recent_images(history, self._media.image_lookback_turns)
        for attachment in earlier[: self._media.max_images]:
            try:
                image = await self._load_image(inbound, attachment)
            except (AttachmentError, ImageError) as exc:
                self._failed(inbound, attachment, exc)
                prepared.model_lines.append(
                    f"[the earlier image file_id={attachment.file_id} could not be fetched "
                    f"again: {exc}]"
                )
                continue
            prepared.images.append(image)
            prepared.model_lines.append(
                f"[the earlier image file_id={attachment.file_id} is attached again below]"
            )

    async def _load_image(self, inbound: Inbound, attachment: Attachment) -> PreparedImage:
        data = await self._fetch(inbound, attachment)
        return await asyncio.to_thread(prepare_image, data, self._media.max_image_px)

    async def _fetch(self, inbound: Inbound, attachment: Attachment) -> bytes:
        try:
            return await fetch(
                self._outbox, inbound.chat, attachment, self._media.max_download_bytes
            )
        except AttachmentError:
            raise
        except Exception as exc:  # an adapter bug must not cost the person their message
            log.exception("attachment download crashed chat=%s", inbound.chat.address)
            raise AttachmentUnavailable(f"the download failed ({type(exc).__name__})") from None

    def _refers_back(self, text: str) -> bool:
        """Whether the message (a transcript included) points back at an image."""
        return self._media.image_lookback_turns > 0 and bool(_REFERS.search(text))

    # -- documents ----------------------------------------------------------------------

    async def _document(
        self, inbound: Inbound, attachment: Attachment, prepared: PreparedInput
    ) -> None:
        """The text of a document the person sent, for the model, marked as outside content.
        A file that is no document is only noted (the model can save it and work with it)."""
        if not may_be_document(attachment.name, attachment.mime_type):
            return
        try:
            data = await self._fetch(inbound, attachment)
        except AttachmentError as exc:
            self._failed(inbound, attachment, exc)
            prepared.model_lines.append(
                f"[file {attachment.file_id} could not be fetched for reading: {exc}]"
            )
            return
        kind = document_kind(attachment.name, attachment.mime_type, data)
        if kind is None:
            return
        name = safe_name(attachment.name or f"document.{kind}")
        try:
            document = await asyncio.to_thread(
                extract,
                data,
                kind,
                max_chars=self._media.document_max_chars,
                max_page_chars=self._media.document_page_chars,
            )
        except DocumentError as exc:
            self._failed(inbound, attachment, exc)
            prepared.notices.append(f"I could not read the text of your file {name}: {exc}.")
            prepared.model_lines.append(f"[the text of {name} could not be read: {exc}]")
            return
        source = f"file {name}"
        body = document.summary(name)
        if document.text and not document.no_text_layer:
            body += "\n" + document.text
        prepared.model_lines.append(wrap(source, body))
        prepared.outside = (*prepared.outside, source)

    # -- speech -------------------------------------------------------------------------

    async def _speech(
        self, inbound: Inbound, attachment: Attachment, prepared: PreparedInput
    ) -> str | None:
        """The transcript line for the model, or None (with a notice) when there is none."""
        is_voice = attachment.kind is AttachmentKind.VOICE
        what = "voice message" if is_voice else f"audio file{_called(attachment)}"
        if self._transcriber is None:
            prepared.notices.append(NO_STT)
            return None
        try:
            data = await self._fetch(inbound, attachment)
            mime = sniff(data)
            if not (mime.startswith("audio/") or mime in ("video/webm", "video/mp4")):
                raise AttachmentError(f"it is {mime}, not audio")
            transcript = await self._transcriber.transcribe(data, mime)
        except (AttachmentError, MediaServiceError) as exc:
            self._failed(inbound, attachment, exc)
            prepared.notices.append(f"I could not transcribe your {what}: {exc}.")
            return None
        if not transcript:
            prepared.notices.append(f"I could not hear any speech in your {what}.")
            return None
        prepared.voice = prepared.voice or is_voice
        if self._settings.stt.echo_transcript:
            prepared.notices.append(f'I heard: "{transcript}"')
        label = "voice message" if is_voice else f"audio file {attachment.file_id}"
        return f"[{label}, transcribed]: {transcript}"

    # -- helpers ------------------------------------------------------------------------

    def _failed(self, inbound: Inbound, attachment: Attachment, exc: Exception) -> None:
        log.warning(
            "attachment not usable chat=%s kind=%s error=%s",
            inbound.chat.address,
            attachment.kind.value,
            exc,
        )

    def _uploads_to(self, inbound: Inbound) -> bool:
        platform = inbound.chat.platform
        return (
            self._outbox.has(platform) and self._outbox.capabilities(platform).max_upload_bytes > 0
        )

    async def _say(self, inbound: Inbound, text: str) -> None:
        try:
            await self._outbox.send(
                Outbound(chat=inbound.chat, text=text, reply_to=inbound.message_id)
            )
        except DeliveryError as exc:
            log.warning("media notice not delivered chat=%s error=%s", inbound.chat.address, exc)

    async def aclose(self) -> None:
        for service in (self._transcriber, self._speaker):
            if service is not None:
                await service.aclose()


def _called(attachment: Attachment) -> str:
    return f" {attachment.name}" if attachment.name else ""


def turn_media(settings: Settings, outbox: Outbox, vision: Vision) -> TurnMedia:
    """TurnMedia with the speech services the settings configure (stt defaults to the LLM's
    server; tts has none unless tts.base_url is set)."""
    transcriber = speaker = None
    stt = endpoint(
        settings.stt, settings.llm, what="speech-to-text", setting="stt", default_to_llm=True
    )
    if settings.stt.enabled and stt is not None:
        transcriber = Transcriber(
            MediaClient(stt), model=settings.stt.model, language=settings.stt.language
        )
    tts = endpoint(
        settings.tts, settings.llm, what="text-to-speech", setting="tts", default_to_llm=False
    )
    if tts is not None:
        speaker = Speaker(MediaClient(tts), model=settings.tts.model, voice=settings.tts.voice)
    return TurnMedia(
        settings=settings, outbox=outbox, vision=vision, transcriber=transcriber, speaker=speaker
    )
