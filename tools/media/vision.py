"""vision_analyze: ask `llm.vision_model` about an image, for a main model that cannot see.

The image is one the person sent in this conversation (by its file_id) or an image file in
the workspace; it is prepared like images for the main model (scaled, re-encoded) and sent
with the question to the vision model on the same server; its answer is the tool result.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from gateway.sdk import (
    LLMClient,
    LLMError,
    Settings,
    ToolContext,
    ToolError,
    ToolSpec,
    image_part,
    text_part,
)
from gateway.sdk.media import ImageError, prepare_image
from tools.args import ToolArgs
from tools.files.attachments import AttachmentFetcher
from tools.files.workspace import WorkspaceFor

GROUP = "media"


class VisionArgs(ToolArgs):
    question: str = Field(description="What to find out about the image.")
    file_id: str = Field(default="", description="An image's file_id from its attachment note.")
    path: str = Field(default="", description="Or an image file in the workspace.")


def vision_client(settings: Settings) -> LLMClient:
    """A client for `llm.vision_model` on the LLM's server, always sending images."""
    return LLMClient(
        settings.llm.model_copy(
            update={"model": settings.llm.vision_model, "vision": "on", "stream": False}
        )
    )


class VisionTool:
    """vision_analyze on one vision model client; MediaTools offers it when one is set."""

    def __init__(
        self,
        workspace_for: WorkspaceFor,
        fetcher: AttachmentFetcher,
        client: LLMClient,
        *,
        max_px: int,
    ) -> None:
        self.workspace_for = workspace_for
        self.fetcher = fetcher
        self.client = client
        self.max_px = max_px

    async def vision_analyze(self, args: VisionArgs, ctx: ToolContext) -> str:
        if bool(args.file_id) == bool(args.path):
            raise ToolError("give either file_id (an image the person sent) or path, not both.")
        if args.file_id:
            attachment = await self.fetcher.find(args.file_id, ctx)
            data = await self.fetcher.fetch(attachment, ctx)
        else:
            with self.workspace_for(ctx).open_file(args.path, "read") as file:
                if file.size > self.fetcher.max_bytes:
                    raise ToolError(
                        f"{file.rel} has {file.size:,} bytes; images up to "
                        f"{self.fetcher.max_bytes:,} are looked at."
                    )
                data = file.read(self.fetcher.max_bytes)
        try:
            image = await asyncio.to_thread(prepare_image, data, self.max_px)
        except ImageError as exc:
            raise ToolError(f"the image cannot be looked at: {exc}.") from None
        content = [text_part(args.question), image_part(image.data_url())]
        try:
            completion = await self.client.complete([{"role": "user", "content": content}])
        except LLMError as exc:
            raise ToolError(f"the vision model failed: {exc.detail}") from None
        return completion.content or "(the vision model gave no answer)"

    def spec(self) -> ToolSpec[Any]:
        return ToolSpec(
            name="vision_analyze",
            description=(
                "Ask a vision model about an image (one the person sent, by file_id, or an "
                "image file in the workspace) and get its answer as text."
            ),
            args=VisionArgs,
            handler=self.vision_analyze,
            group=GROUP,
            untrusted_output=True,  # text in an image is outside content like a web page's
        )
