"""An in-process gateway for end-to-end tests: the real App, a console adapter, a scripted LLM.

async with ScriptedLLM() as llm, running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
    outcome = await gw.say("hello")
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from adapters.console import ConsoleAdapter
from gateway.app.app import App, load_settings
from gateway.config import Settings
from gateway.intake.admission import Submission
from gateway.sdk.channels import Adapter
from gateway.turn.runner import TurnOutcome


def gateway_settings(
    tmp_path: Path, llm_url: str, *, redis_url: str = "", key_prefix: str = "", **sections: Any
) -> Settings:
    """Settings for a test gateway: fast retries, no HTTP port, no rate limit; sections merge in."""
    base: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "llm": {
            "base_url": llm_url,
            "model": "fake-model",
            "max_retries": 2,
            "retry_base_delay": 0.01,
            "retry_max_delay": 2.0,
            "timeout": 10.0,
        },
        "http": {"enabled": False, "port": 0},
        "access": {"rate_limit_per_minute": 0},
        "router": {"typing_delay": 0.0},
    }
    if redis_url:
        base["redis"] = {"url": redis_url, "key_prefix": key_prefix or f"t{uuid.uuid4().hex[:8]}"}
    for name, values in sections.items():
        if isinstance(values, dict) and isinstance(base.get(name), dict):
            base[name] = {**base[name], **values}
        else:
            base[name] = values
    return load_settings(None, **base)


async def eventually(condition: Callable[[], bool], within: float = 10.0, what: str = "") -> None:
    """Wait until `condition()` holds (checked every 20 ms); fail after `within` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {within} s: {what or condition}")
        await asyncio.sleep(0.02)


class Harness:
    def __init__(self, app: App, console: ConsoleAdapter) -> None:
        self.app = app
        self.console = console

    async def submit(self, text: str, **where: Any) -> Submission:
        return await self.app.admission.submit(self.console.inbound(text, **where))

    async def say(self, text: str, **where: Any) -> TurnOutcome:
        """Send a message and wait until its turn has finished."""
        submission = await self.submit(text, **where)
        return await submission.done

    @property
    def texts(self) -> list[str]:
        return [out.text for out in self.console.sent]


@contextlib.asynccontextmanager
async def running_gateway(
    settings: Settings, *, adapters: Sequence[Adapter] = (), **app_kwargs: Any
) -> AsyncIterator[Harness]:
    app = App(settings, **app_kwargs)
    console = ConsoleAdapter("chat1", "alice", echo=False)
    app.add_adapter(console)
    for adapter in adapters:
        app.add_adapter(adapter)
    await app.start()
    try:
        yield Harness(app, console)
    finally:
        await app.stop()


@contextlib.asynccontextmanager
async def configured_gateway(settings: Settings) -> AsyncIterator[App]:
    """The real App with the platforms its settings configure, started (as `chatgate run`)."""
    app = App(settings)
    app.add_configured_adapters()
    await app.start()
    try:
        yield app
    finally:
        await app.stop()
