"""Which event loop `chatgate run` takes (settings.event_loop, gateway/runtime/event_loop.py)."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest
import uvloop

from gateway.app.cli import main
from gateway.config import ConfigError, Settings
from gateway.runtime.event_loop import event_loop_runner, loop_name


async def _kind() -> str:
    return loop_name()


async def test_async_tests_run_on_the_loop_chatgate_run_takes() -> None:
    """tests/conftest.py: uvloop, as `event_loop = auto` gives, unless TEST_EVENT_LOOP=asyncio."""
    expected = "asyncio" if os.environ.get("TEST_EVENT_LOOP") == "asyncio" else "uvloop"
    assert loop_name() == expected


def test_auto_runs_on_uvloop_where_it_is_installed() -> None:
    assert event_loop_runner("auto")(_kind()) == "uvloop"
    assert event_loop_runner("uvloop")(_kind()) == "uvloop"
    assert event_loop_runner("asyncio")(_kind()) == "asyncio"
    assert event_loop_runner("auto") is uvloop.run


def test_without_uvloop_auto_falls_back_and_uvloop_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    assert event_loop_runner("auto") is asyncio.run
    with pytest.raises(ConfigError, match="uvloop is not installed"):
        event_loop_runner("uvloop")


def test_the_setting_is_checked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert Settings().event_loop == "auto"
    monkeypatch.setenv("CHATGATE_EVENT_LOOP", "libev")
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert "event_loop" in err and "'auto', 'uvloop' or 'asyncio'" in err
