"""Images that tool results carry: shown to the model after the results, scaled, capped in
number, and an undecodable one named instead of sent."""

from __future__ import annotations

import base64
import io

from PIL import Image

from gateway.turn.agent import MAX_SHOWN_IMAGES, images_message


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "red").save(out, "PNG")
    return out.getvalue()


def decoded(part: dict[str, object]) -> Image.Image:
    url = part["image_url"]["url"]  # type: ignore[index]
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


async def test_images_are_scaled_and_an_undecodable_one_is_named() -> None:
    message = await images_message([png(3000, 1000), b"not an image", png(10, 10)], 1000)
    assert message["role"] == "user"
    text, big, small = message["content"]
    assert text["text"].splitlines()[1].startswith("(image 2 cannot be shown: ")
    assert decoded(big).size == (1000, 333) and decoded(small).size == (10, 10)


async def test_at_most_a_few_images_follow_one_step() -> None:
    message = await images_message([png(4, 4)] * (MAX_SHOWN_IMAGES + 3), 100)
    text, *images = message["content"]
    assert len(images) == MAX_SHOWN_IMAGES
    assert text["text"].endswith("(3 more not shown)")
