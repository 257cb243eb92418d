"""send_file: what it sends (typed from the bytes, within the platform's limit) and what it
refuses: paths outside the workspace, links and hard links out, the gateway's own store and
config, files holding a credential, files over the limit, platforms without uploads."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.console import ConsoleAdapter
from gateway.app.app import load_settings
from gateway.config import Settings
from gateway.sdk.channels import Outbox
from gateway.sdk.messages import AttachmentKind, ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError, ToolSpec
from gateway.sessions.key import SessionKey
from tests.fakes.recording_adapter import RecordingAdapter
from tests.media_samples import PDF, ogg_opus, png
from tools.files.workspaces import Workspaces
from tools.media.outbound import FileSender, SendFileTool

TOKEN = "123456:SECRET-bot-token-value"


def context(platform: str = "console") -> ToolContext:
    return ToolContext(
        session=SessionKey(platform, "t"),
        chat=ChatRef(platform=platform, chat_id="t"),
        user=UserRef(platform=platform, user_id="u"),
        message_id="m1",
    )


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # The workspace is the data folder itself, so the store's file is reachable by path: the
    # worst case, where only the identity check stands between the model and the store.
    return load_settings(
        None,
        data_dir=tmp_path,
        tools={"workspace": tmp_path, "workspace_scope": "shared"},
        media={"max_upload_mb": 0.01},
        telegram={"token": TOKEN},
    )


@pytest.fixture
def console() -> ConsoleAdapter:
    return ConsoleAdapter("t", "u", echo=False)


SendFile = Callable[..., Awaitable[str]]


@pytest.fixture
def send_file(settings: Settings, console: ConsoleAdapter) -> SendFile:
    outbox = Outbox()
    outbox.register(console)
    outbox.register(RecordingAdapter("rec"))  # a platform that takes no files
    sender = FileSender(settings, outbox, lambda: [TOKEN])
    spec: ToolSpec[Any] = SendFileTool(
        Workspaces(settings.workspace, "shared").for_context, sender
    ).spec()

    async def call(platform: str = "console", **args: Any) -> str:
        return await spec.handler(spec.args(**args), context(platform))

    return call


async def test_files_are_typed_from_their_bytes(
    send_file: SendFile, settings: Settings, console: ConsoleAdapter
) -> None:
    (settings.workspace / "chart.txt").write_bytes(png(40, 30))  # the name lies
    (settings.workspace / "note.ogg").write_bytes(ogg_opus())
    (settings.workspace / "doc").write_bytes(PDF)
    assert await send_file(path="chart.txt", caption="see") == (
        f"sent chart.txt (image/png, {len(png(40, 30)):,} bytes) as an image"
    )
    assert (await send_file(path="note.ogg")).endswith("as audio")
    assert (await send_file(path="doc")).endswith("as a document")
    photo, audio, document = (out.attachments[0] for out in console.sent)
    assert (photo.kind, photo.mime_type, photo.name) == (
        AttachmentKind.IMAGE,
        "image/png",
        "chart.txt",
    )
    assert photo.data == png(40, 30) and console.sent[0].text == "see"
    assert console.sent[0].reply_to == "m1"
    assert audio.kind is AttachmentKind.AUDIO and document.name == "doc.pdf"


async def test_refusals(send_file: SendFile, settings: Settings, tmp_path: Path) -> None:
    ws = settings.workspace
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret plans")
    (ws / "link.txt").symlink_to(outside)
    os.link(outside, ws / "hard.txt")  # a hard link to the file outside
    (ws / "creds.txt").write_text(f"token={TOKEN}\n")
    (ws / "big.bin").write_bytes(b"\x01" * 20_000)
    (ws / "empty.txt").write_bytes(b"")
    (ws / "chatgate.db").write_bytes(b"SQLite format 3\x00")
    cases = {
        "../outside.txt": "outside the workspace",
        str(outside): "outside the workspace",
        "link.txt": "outside the workspace",
        "hard.txt": "hard links",
        "creds.txt": "contains one of the gateway's credentials",
        "big.bin": "has 20,000 bytes; files sent on console may have at most 10,000",
        "empty.txt": "is empty",
        "chatgate.db": "belongs to the gateway itself",
        "missing.txt": "does not exist",
    }
    for path, reason in cases.items():
        with pytest.raises(ToolError, match=reason):
            await send_file(path=path)
    with pytest.raises(ToolError, match="files cannot be sent on rec"):
        await send_file("rec", path="empty.txt")


async def test_the_config_file_is_never_sent(
    send_file: SendFile, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings.workspace / "chatgate.toml"
    config.write_text('[llm]\nmodel = "x"\n')
    monkeypatch.setenv("CHATGATE_CONFIG", str(config))
    with pytest.raises(ToolError, match="belongs to the gateway itself"):
        await send_file(path="chatgate.toml")
