"""What a file is, from its first bytes: a platform's or a file name's claim is never trusted.

Covers the formats chatgate treats differently (images for the model and for photo uploads,
audio for transcription and voice notes, video) and the common documents; anything else is
`application/octet-stream`, or `text/plain` when it decodes as UTF-8 without NUL bytes.
"""

from __future__ import annotations

import io
import re
import zipfile

from gateway.sdk.messages import AttachmentKind

OCTET_STREAM = "application/octet-stream"
# Formats the model's image input and the platforms' photo uploads take.
WEB_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

_EXTENSIONS = {
    "image/jpeg": ".jpg",
    "image/png": ".png",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/heic": ".heic",
    "image/tiff": ".tiff",
    "image/bmp": ".bmp",
    "application/pdf": ".pdf",
    "application/zip": ".zip",
    "application/gzip": ".gz",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "audio/ogg": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/wav": ".wav",
    "audio/flac": ".flac",
    "audio/mp4": ".m4a",
    "audio/aac": ".aac",
    "audio/amr": ".amr",
    "video/mp4": ".mp4",
    "video/quicktime": ".mov",
    "video/webm": ".webm",
    "video/x-matroska": ".mkv",
    "text/plain": ".txt",
}
_OOXML = (
    ("word/", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ("xl/", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ("ppt/", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
)
_AUDIO_BRANDS = (b"M4A ", b"M4B ", b"F4A ")
_MP3_SYNC = re.compile(rb"^\xff[\xe2-\xff]")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def sniff(data: bytes) -> str:
    """The MIME type of `data`, decided by its content."""
    head = data[:64]
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and len(head) >= 12:
        return {b"WEBP": "image/webp", b"WAVE": "audio/wav"}.get(head[8:12], OCTET_STREAM)
    if head[4:8] == b"ftyp":
        return _iso_media(head[8:12])
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "video/webm" if b"webm" in data[:64] else "video/x-matroska"
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(data)
    if head.startswith(b"ID3") or _MP3_SYNC.match(head):
        return "audio/mpeg"
    return "text/plain" if _is_text(data) else OCTET_STREAM


_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"%PDF-", "application/pdf"),
    (b"\x1f\x8b", "application/gzip"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"#!AMR", "audio/amr"),
    (b"\xff\xf1", "audio/aac"),  # ADTS, checked before the MP3 frame sync
    (b"\xff\xf9", "audio/aac"),
)


def _iso_media(brand: bytes) -> str:
    """ISO base media (MP4 family), told apart by the major brand."""
    if brand in (b"heic", b"heix", b"heim", b"heis", b"mif1", b"msf1", b"avif"):
        return "image/avif" if brand == b"avif" else "image/heic"
    if brand in _AUDIO_BRANDS:
        return "audio/mp4"
    if brand == b"qt  ":
        return "video/quicktime"
    return "video/mp4"


def _zip_kind(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()[:50]
    except (zipfile.BadZipFile, ValueError, OSError):
        return "application/zip"
    if "[Content_Types].xml" in names:
        for prefix, mime in _OOXML:
            if any(name.startswith(prefix) for name in names):
                return mime
    return "application/zip"


def _is_text(data: bytes) -> bool:
    sample = data[:8192]
    if not sample or b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sample is still text.
        return exc.start >= len(sample) - 3
    return True


def kind_of(mime: str) -> AttachmentKind:
    """How a file of this type is sent: images as photos, audio as audio, the rest as documents."""
    if mime in WEB_IMAGES:
        return AttachmentKind.IMAGE
    if mime.startswith("audio/"):
        return AttachmentKind.AUDIO
    if mime.startswith("video/"):
        return AttachmentKind.VIDEO
    return AttachmentKind.DOCUMENT


def declared_kind(mime: str | None) -> AttachmentKind:
    """The kind a platform's declared MIME type suggests; the turn sniffs the bytes before it
    relies on it."""
    major = (mime or "").split("/", 1)[0]
    if major in ("image", "audio", "video"):
        return AttachmentKind(major)
    return AttachmentKind.DOCUMENT if mime else AttachmentKind.OTHER


def extension_for(mime: str) -> str:
    return _EXTENSIONS.get(mime, "")


def safe_name(name: str | None, mime: str = "", *, fallback: str = "file") -> str:
    """A file name that is one plain path component: letters, digits, `._-`; no leading dot;
    at most 100 characters; the type's extension added when the name has none."""
    base = (name or "").rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    clean = _UNSAFE_NAME.sub("_", base).strip("._")[:100].rstrip("._") or fallback
    extension = extension_for(mime)
    if extension and "." not in clean:
        clean += extension
    return clean
