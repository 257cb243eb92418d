"""Images prepared for the model: decoded with Pillow, turned upright, scaled to at most
`media.max_image_px` on the long side and re-encoded (which also drops EXIF metadata such
as a photo's GPS position), then sent as a `data:` URL.

Lossless sources (PNG, GIF: screenshots, charts) stay PNG so text stays sharp, unless that
comes out large; photos become JPEG.
"""

from __future__ import annotations

import base64
import io
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.media.sniff import WEB_IMAGES, sniff

if TYPE_CHECKING:
    from PIL import Image

# Pillow (about 3 MB resident) is imported by the first image, not at start: most
# gateways go a long while without one.

# Pixels decoded at most: a 10,000 x 10,000 image; more is a decompression bomb or a scan
# nobody needs in full, and Pillow would allocate it all.
MAX_PIXELS = 100_000_000
_PNG_BUDGET = 2_000_000  # bytes; a PNG larger than this is sent as JPEG instead
_JPEG_QUALITY = 85


class ImageError(ValueError):
    """The bytes are not an image the model can be shown; the message says why."""


@dataclass(frozen=True)
class PreparedImage:
    mime: str
    data: bytes
    width: int
    height: int

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


def prepare_image(data: bytes, max_px: int) -> PreparedImage:
    """The image scaled and re-encoded for the model; ImageError for anything else.

    CPU-bound (tens of ms for a phone photo): call it through asyncio.to_thread.
    """
    mime = sniff(data)
    if mime not in WEB_IMAGES:
        raise ImageError(
            f"it is {_describe(mime)}, not a JPEG, PNG, GIF or WebP image"
            if mime != "image/heic"
            else "HEIC images are not supported; send it as a JPEG or PNG (or as a photo)"
        )
    from PIL import Image, ImageOps

    try:
        with warnings.catch_warnings():
            # Pillow warns above its own limit; ours, below, is checked before decoding.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            source = Image.open(io.BytesIO(data))
        with source:
            width, height = source.size
            if width * height > MAX_PIXELS:
                raise ImageError(
                    f"it has {width}x{height} pixels; images up to {MAX_PIXELS:,} pixels "
                    "are accepted"
                )
            source.seek(0)  # the first frame of an animation
            image = ImageOps.exif_transpose(source)
            image.thumbnail((max_px, max_px), Image.Resampling.LANCZOS)
            return _encode(image, lossless=mime in ("image/png", "image/gif"))
    except ImageError:
        raise
    except Image.DecompressionBombError:
        raise ImageError(f"it has more than {MAX_PIXELS:,} pixels") from None
    except Exception as exc:  # Pillow raises many types for broken files
        raise ImageError(f"the image could not be decoded ({type(exc).__name__})") from None


def _encode(image: Image.Image, *, lossless: bool) -> PreparedImage:
    transparent = image.mode in ("RGBA", "LA", "PA") or (
        image.mode == "P" and "transparency" in image.info
    )
    if lossless or transparent:
        converted = (
            image if image.mode in ("RGB", "RGBA", "L", "LA", "P") else image.convert("RGBA")
        )
        buffer = io.BytesIO()
        converted.save(buffer, format="PNG", optimize=True)
        if buffer.tell() <= _PNG_BUDGET:
            return PreparedImage("image/png", buffer.getvalue(), *image.size)
    rgb = _flatten(image)
    buffer = io.BytesIO()
    rgb.save(buffer, format="JPEG", quality=_JPEG_QUALITY, optimize=True)
    return PreparedImage("image/jpeg", buffer.getvalue(), *rgb.size)


def _flatten(image: Image.Image) -> Image.Image:
    """RGB for JPEG: transparency onto white, as the chat apps show it."""
    from PIL import Image

    if image.mode == "RGB":
        return image
    rgba = image.convert("RGBA")
    background = Image.new("RGB", rgba.size, (255, 255, 255))
    background.paste(rgba, mask=rgba.getchannel("A"))
    return background


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from the header alone (no decoding); None when unreadable."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
        with image:
            return image.size
    except Exception:  # Pillow raises many types for broken files
        return None


def _describe(mime: str) -> str:
    return "a file of unknown type" if mime == "application/octet-stream" else f"{mime}"
