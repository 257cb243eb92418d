"""Media helpers for plugins: bounded downloads, sniffing a file's kind, preparing images for
the model, the text of documents, and the clients of the image and speech services."""

from __future__ import annotations

from gateway.media.content import find_attachment
from gateway.media.documents import DocumentError, DocumentText, document_kind, extract
from gateway.media.fetch import fetch, read_limited, too_large
from gateway.media.images import ImageError, image_size, prepare_image
from gateway.media.services import ImageGenerator, MediaClient, MediaServiceError, Speaker, endpoint
from gateway.media.sniff import WEB_IMAGES, declared_kind, extension_for, kind_of, safe_name, sniff

__all__ = [
    "WEB_IMAGES",
    "DocumentError",
    "DocumentText",
    "ImageError",
    "ImageGenerator",
    "MediaClient",
    "MediaServiceError",
    "Speaker",
    "declared_kind",
    "document_kind",
    "endpoint",
    "extension_for",
    "extract",
    "fetch",
    "find_attachment",
    "image_size",
    "kind_of",
    "prepare_image",
    "read_limited",
    "safe_name",
    "sniff",
    "too_large",
]
