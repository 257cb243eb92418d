"""Image input to the model (`llm.vision`): "on" always sends image parts, "off" never does,
"auto" sends them until the server refuses, then remembers that for the model and sends the
same request again with a note in each image's place, so the person's message is answered.

The memory is per model and in memory only: a restarted gateway spends one refused request
to learn it again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from gateway.config import ProviderSettings
from gateway.llm.errors import LLMImagesRejected, LLMRequestError
from gateway.llm.images import has_images, without_images
from gateway.llm.types import Completion, Message

log = logging.getLogger(__name__)

Send = Callable[[list[Message]], Awaitable[Completion]]

# Refusals after which a request with images is tried once more without them: servers do
# not always say that images were the problem ("invalid content", "bad request").
_MAYBE_IMAGES = frozenset({400, 404, 415, 422})


class Vision:
    def __init__(self, settings: ProviderSettings) -> None:
        self._settings = settings
        self._known: dict[str, bool] = {}  # model -> took images (True) / refused (False)

    @property
    def accepts_images(self) -> bool | None:
        """True or False when known; None while "auto" has not sent an image yet."""
        if self._settings.vision == "off":
            return False
        if self._settings.vision == "on":
            return True
        return self._known.get(self._settings.model)

    @property
    def note(self) -> str:
        """What the model reads where an image it cannot see was."""
        if self._settings.vision_model:
            return (
                "[This image cannot be shown to you: your model does not accept images. "
                "To learn what it shows, call vision_analyze with the file_id from its "
                "attachment note and a question.]"
            )
        return (
            "[This image cannot be shown to you: your model does not accept images, and the "
            "person has been told so. Work from their text.]"
        )

    async def complete(self, messages: list[Message], send: Send) -> Completion:
        """`send(messages)`, with image parts as the setting and what is known allow."""
        if not has_images(messages):
            return await send(messages)
        if self.accepts_images is False:
            return await send(without_images(messages, self.note))
        model = self._settings.model
        try:
            completion = await send(messages)
        except LLMRequestError as exc:
            if self._settings.vision != "auto" or not (
                isinstance(exc, LLMImagesRejected) or exc.status in _MAYBE_IMAGES
            ):
                raise
            # Proven only when the same request without the images goes through.
            completion = await send(without_images(messages, self.note))
            self._known[model] = False
            log.warning(
                "llm refused image input; images go as notes from now on model=%s detail=%s",
                model,
                exc.detail,
            )
            return completion
        self._known[model] = True
        return completion
