"""Media tools: send_file (a workspace file into the chat), image_generate and text_to_speech.

Files are read through the workspace API (links and hard links out of it are refused, as the
file tools refuse them), never the gateway's store or config, and never a file that holds
one of the gateway's credentials. What is sent is typed from its bytes: images go as
photos, audio as audio, the rest as documents, within the platform's upload limit.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import Field

from gateway.sdk import (
    ApprovalNeed,
    AttachmentKind,
    DeliveryError,
    Outbound,
    OutboundFile,
    Outbox,
    Settings,
    ToolContext,
    ToolError,
    ToolFamily,
    ToolSpec,
    config_secrets_files,
    secret_values,
    untrusted,
)
from gateway.sdk.media import (
    ImageGenerator,
    MediaClient,
    MediaServiceError,
    Speaker,
    endpoint,
    extension_for,
    kind_of,
    safe_name,
    sniff,
)
from tools.args import ToolArgs
from tools.files.attachments import AttachmentFetcher
from tools.files.workspace import WorkspaceFor
from tools.media.vision import VisionTool, vision_client

GROUP = "media"
_STORE_FILES = ("chatgate.db", "chatgate.db-wal", "chatgate.db-shm")
_SLUG = re.compile(r"[^a-z0-9]+")
_AS = {
    AttachmentKind.IMAGE: "an image",
    AttachmentKind.AUDIO: "audio",
    AttachmentKind.VOICE: "a voice message",
    AttachmentKind.VIDEO: "a video",
}


class SendFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the workspace.")
    caption: str = Field(default="", description="Text sent with the file.")


class ImageGenerateArgs(ToolArgs):
    prompt: str = Field(description="What the image shows, in detail.")
    path: str = Field(default="", description="Where to save it (default: images/<name>.png).")
    caption: str = Field(default="", description="Text sent with the image.")


class SpeechArgs(ToolArgs):
    text: str = Field(description="What to say, as plain sentences.")
    voice: str = Field(default="", description="A voice name of the speech service.")


class FileSender:
    """Sends files into the conversation a tool call runs in, within the upload limits."""

    def __init__(self, settings: Settings, outbox: Outbox, secrets: Callable[[], list[str]]):
        self._settings = settings
        self._outbox = outbox
        self._secrets = secrets

    def limit(self, ctx: ToolContext) -> int:
        platform = ctx.chat.platform
        if not self._outbox.has(platform):
            return 0
        cap = self._outbox.capabilities(platform).max_upload_bytes
        return min(cap, self._settings.media.max_upload_bytes)

    def check_size(self, size: int, what: str, ctx: ToolContext) -> int:
        """The upload limit here; ToolError when files cannot be sent or `size` is over it."""
        limit = self.limit(ctx)
        if limit <= 0:
            raise ToolError(f"files cannot be sent on {ctx.chat.platform}.")
        if size > limit:
            raise ToolError(
                f"{what} has {size:,} bytes; files sent on {ctx.chat.platform} may have at "
                f"most {limit:,}. Make it smaller (compress or split it) and try again."
            )
        return limit

    def check(self, data: bytes, what: str, ctx: ToolContext) -> None:
        self.check_size(len(data), what, ctx)
        if not data:
            raise ToolError(f"{what} is empty; there is nothing to send.")
        if any(secret.encode() in data for secret in self._secrets() if len(secret) >= 8):
            raise ToolError(f"{what} contains one of the gateway's credentials; it is not sent.")

    async def send(self, ctx: ToolContext, file: OutboundFile, caption: str) -> None:
        out = Outbound(chat=ctx.chat, text=caption, attachments=(file,), reply_to=ctx.message_id)
        try:
            # A streamed reply is finished first and goes on below the file.
            async with ctx.stream.paused():
                await self._outbox.send(out)
        except DeliveryError as exc:
            raise ToolError(f"the file was not delivered: {exc}") from None

    def protected(self) -> set[tuple[int, int]]:
        """(device, inode) of the store's files and the config file, wherever they are."""
        paths: list[Path] = [self._settings.data_dir.expanduser() / n for n in _STORE_FILES]
        paths.extend(config_secrets_files(self._settings))
        return set(_identities(paths))


def _identities(paths: Iterable[Path]) -> Iterable[tuple[int, int]]:
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        yield info.st_dev, info.st_ino


class SendFileTool:
    """send_file: a workspace file into the conversation."""

    def __init__(self, workspace_for: WorkspaceFor, sender: FileSender) -> None:
        self.workspace_for = workspace_for
        self.sender = sender

    async def send_file(self, args: SendFileArgs, ctx: ToolContext) -> str:
        self.sender.check_size(0, args.path, ctx)
        with self.workspace_for(ctx).open_file(args.path, "read") as file:
            info = os.fstat(file.fd)
            if (info.st_dev, info.st_ino) in self.sender.protected():
                raise ToolError(f"{args.path!r} belongs to the gateway itself; it is not sent.")
            limit = self.sender.check_size(file.size, file.rel, ctx)
            data = file.read(limit + 1)  # one byte more shows a file that grew meanwhile
            rel = file.rel
        self.sender.check(data, rel, ctx)
        mime = sniff(data)
        kind = kind_of(mime)
        name = safe_name(rel, mime)
        await self.sender.send(
            ctx, OutboundFile(kind=kind, name=name, mime_type=mime, data=data), args.caption
        )
        return f"sent {rel} ({mime}, {len(data):,} bytes) as {_AS.get(kind, 'a document')}"

    def spec(self) -> ToolSpec[Any]:
        return ToolSpec(
            name="send_file",
            description=(
                "Send a file from the workspace to the person in this chat (images as photos, "
                "audio as audio, anything else as a document), with an optional caption."
            ),
            args=SendFileArgs,
            handler=self.send_file,
            group=GROUP,
            side_effects=self.after_outside_content,
        )

    async def after_outside_content(
        self, args: SendFileArgs, ctx: ToolContext
    ) -> ApprovalNeed | None:
        """After outside content, posting a workspace file asks first: it may be one the
        chat has not seen. A file people sent or the browser downloaded is outside content
        itself; posting it back into the chat shows nothing the reply could not."""
        workspace = self.workspace_for(ctx)
        try:
            if untrusted.outside_file(workspace.relative(workspace.resolve(args.path))):
                return None
        except ToolError:
            pass  # the call itself will say what is wrong with the path
        return untrusted.generic_need("send_file", args)


class ImageGenerateTool:
    """image_generate: an image from a description, saved in the workspace and sent."""

    def __init__(
        self, workspace_for: WorkspaceFor, sender: FileSender, images: ImageGenerator
    ) -> None:
        self.workspace_for = workspace_for
        self.sender = sender
        self.images = images

    async def image_generate(self, args: ImageGenerateArgs, ctx: ToolContext) -> str:
        try:
            data, mime = await self.images.generate(args.prompt)
        except MediaServiceError as exc:
            raise ToolError(str(exc)) from None
        name = safe_name(_slug(args.prompt), mime, fallback="image")
        path = args.path or f"images/{time.strftime('%Y%m%d-%H%M%S')}-{name}"
        rel, _ = self.workspace_for(ctx).write_bytes(path, data)
        saved = f"saved {rel} ({mime}, {len(data):,} bytes)"
        if self.sender.limit(ctx) <= 0:
            return f"{saved}; files cannot be sent on {ctx.chat.platform}."
        self.sender.check(data, rel, ctx)
        image = OutboundFile(kind=AttachmentKind.IMAGE, name=name, mime_type=mime, data=data)
        await self.sender.send(ctx, image, args.caption)
        return f"{saved} and sent it to the chat."

    def spec(self) -> ToolSpec[Any]:
        return ToolSpec(
            name="image_generate",
            description=(
                "Create an image from a description, save it in the workspace and send it to the "
                "chat."
            ),
            args=ImageGenerateArgs,
            handler=self.image_generate,
            group=GROUP,
            side_effects=True,
            timeout=180.0,
        )


class SpeechTool:
    """text_to_speech: a voice message from the speech service."""

    def __init__(self, sender: FileSender, speaker: Speaker) -> None:
        self.sender = sender
        self.speaker = speaker

    async def text_to_speech(self, args: SpeechArgs, ctx: ToolContext) -> str:
        if not args.text.strip():
            raise ToolError("the text is empty; give the sentences to speak.")
        try:
            speech = await self.speaker.speak(args.text, args.voice)
        except MediaServiceError as exc:
            raise ToolError(str(exc)) from None
        self.sender.check(speech.data, "the voice message", ctx)
        voice = OutboundFile(
            kind=AttachmentKind.VOICE,
            name="voice" + (extension_for(speech.mime) or ".ogg"),
            mime_type=speech.mime,
            data=speech.data,
        )
        await self.sender.send(ctx, voice, "")
        return f"sent a voice message ({speech.mime}, {len(speech.data):,} bytes)."

    def spec(self) -> ToolSpec[Any]:
        return ToolSpec(
            name="text_to_speech",
            description="Say something to the person as a voice message.",
            args=SpeechArgs,
            handler=self.text_to_speech,
            group=GROUP,
        )


def _slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-")[:40] or "image"


class MediaTools(ToolFamily):
    """send_file always; image_generate, text_to_speech and vision_analyze only when their
    endpoint or model is configured (images.base_url, tts.base_url, llm.vision_model)."""

    name = "media"

    def __init__(
        self,
        settings: Settings,
        outbox: Outbox,
        workspace_for: WorkspaceFor,
        fetcher: AttachmentFetcher,
    ) -> None:
        sender = FileSender(settings, outbox, lambda: secret_values(settings))
        self.send_file_tool = SendFileTool(workspace_for, sender)
        self.image_tool: ImageGenerateTool | None = None
        self.speech_tool: SpeechTool | None = None
        self.vision_tool: VisionTool | None = None
        where = endpoint(
            settings.images, settings.llm, what="image", setting="images", default_to_llm=False
        )
        if where is not None:
            images = ImageGenerator(
                MediaClient(where), model=settings.images.model, size=settings.images.size
            )
            self.image_tool = ImageGenerateTool(workspace_for, sender, images)
        where = endpoint(
            settings.tts, settings.llm, what="text-to-speech", setting="tts", default_to_llm=False
        )
        if where is not None:
            speaker = Speaker(
                MediaClient(where), model=settings.tts.model, voice=settings.tts.voice
            )
            self.speech_tool = SpeechTool(sender, speaker)
        if settings.llm.vision_model:
            self.vision_tool = VisionTool(
                workspace_for,
                fetcher,
                vision_client(settings),
                max_px=settings.media.max_image_px,
            )

    def specs(self) -> list[ToolSpec[Any]]:
        offered = [self.send_file_tool, self.image_tool, self.speech_tool, self.vision_tool]
        return [tool.spec() for tool in offered if tool is not None]

    async def close(self) -> None:
        if self.image_tool is not None:
            await self.image_tool.images.aclose()
        if self.speech_tool is not None:
            await self.speech_tool.speaker.aclose()
        if self.vision_tool is not None:
            await self.vision_tool.client.aclose()
