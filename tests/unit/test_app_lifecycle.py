"""The App's lifecycle: building opens nothing; starting opens each part and stopping closes
them in reverse; a start that fails closes what it had opened before it raises."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.app.app import App
from gateway.store import StoreLocked
from gateway.store.embedded import EmbeddedStore
from tests.fakes.llm import ScriptedLLM
from tests.fakes.recording_adapter import RecordingAdapter
from tests.harness import gateway_settings


def held(data: Path) -> set[str]:
    """The sockets and the data directory's files this process holds open."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used
            continue
        if target.startswith(("socket:", str(data.resolve()))):
            found.add(f"{fd} {target}")
    return found


class Refusing(RecordingAdapter):
    """A platform whose start fails, as one refusing its token does."""

    def __init__(self, platform: str, events: list[str]) -> None:
        super().__init__(platform)
        self.events = events

    async def start(self) -> None:
        raise RuntimeError("the platform refused the token")

    async def stop(self) -> None:  # what a half-started platform opened is closed too
        self.events.append(f"stop {self.platform}")


class Recorded(RecordingAdapter):
    def __init__(self, platform: str, events: list[str]) -> None:
        super().__init__(platform)
        self.events = events

    async def start(self) -> None:
        self.events.append(f"start {self.platform}")

    async def stop(self) -> None:
        self.events.append(f"stop {self.platform}")


def test_building_an_app_opens_and_locks_nothing(tmp_path: Path) -> None:
    """No event loop runs here: building needs none, and takes no lock."""
    settings = gateway_settings(tmp_path, "http://127.0.0.1:9/v1")
    before = held(tmp_path)
    App(settings)
    assert held(tmp_path) == before
    other = EmbeddedStore(settings.data_dir)  # would raise StoreLocked if the App held it
    other.abandon()


async def test_stop_closes_in_reverse_what_start_opened(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url)
    events: list[str] = []
    app = App(settings)
    app.add_adapter(Recorded("first", events))
    app.add_adapter(Recorded("second", events))
    before = held(tmp_path / "data")
    await app.start()
    with pytest.raises(StoreLocked):
        EmbeddedStore(settings.data_dir)
    await app.stop()
    assert events == ["start first", "start second", "stop second", "stop first"]
    assert held(tmp_path / "data") == before
    EmbeddedStore(settings.data_dir).abandon()
    await app.stop()  # a second stop has nothing left to close


async def test_a_start_that_fails_closes_what_it_had_opened(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = gateway_settings(tmp_path, llm.url)
    events: list[str] = []
    app = App(settings)
    app.add_adapter(Recorded("first", events))
    app.add_adapter(Refusing("refusing", events))
    app.add_adapter(Recorded("never", events))
    before = held(tmp_path / "data")
    with pytest.raises(RuntimeError, match="refused the token"):
        await app.start()
    assert events == ["start first", "stop refusing", "stop first"]
    assert held(tmp_path / "data") == before
    EmbeddedStore(settings.data_dir).abandon()  # the lock is free again
    await app.stop()  # nothing is left to stop


async def test_a_store_another_process_holds_fails_the_start_not_the_build(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = gateway_settings(tmp_path, llm.url)
    holder = EmbeddedStore(settings.data_dir)
    try:
        app = App(settings)
        with pytest.raises(StoreLocked, match="already in use"):
            await app.start()
    finally:
        await holder.close()
    async with app:  # the same App starts once the store is free
        assert await app.store.get("missing") is None
