"""What a process loads is what it runs: `chatgate --help` builds its parser without pydantic,
the platforms or an HTTP client, and listing the platforms loads no platform's SDK or the web
chat's pages. Checked in a fresh interpreter, where nothing else has imported them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def _roots(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_the_cli_parser_loads_nothing_heavy() -> None:
    loaded = _loaded_after("from gateway.app import cli\ncli._parser()")
    heavy = {"pydantic", "pydantic_settings", "httpx", "aiohttp", "telegram", "asyncio", "adapters"}
    assert _roots(loaded) & heavy == set()


def test_help_prints_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gateway.app.cli", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for command in ("run", "chat", "ask", "doctor", "config", "tools", "skills", "mcp", "cron"):
        assert command in out


def test_listing_the_platforms_loads_no_platform_code() -> None:
    loaded = _loaded_after("from adapters.registry import plugins\nplugins()")
    assert _roots(loaded) & {"telegram", "discord", "slack_bolt", "httpx", "PIL", "jinja2"} == set()
    assert not {m for m in loaded if m.startswith(("adapters.web.", "adapters.api."))} - {
        "adapters.web.plugin",
        "adapters.web.settings",
        "adapters.api.plugin",
        "adapters.api.settings",
    }


def test_each_plugin_is_named_as_its_adapter() -> None:
    from adapters.api.adapter import PLATFORM as API
    from adapters.registry import plugin
    from adapters.web.adapter import PLATFORM as WEB

    assert plugin(WEB).name == WEB
    assert plugin(API).name == API


# `chatgate run` with only Telegram configured, after it has answered one message: what is
# loaded then stays loaded, so none of these may be, as none is configured or used yet.
NOT_LOADED_BY_A_TELEGRAM_GATEWAY = (
    "PIL",  # the first image loads it
    "httpcore",  # httpx's transport: the speech-to-text client is made for the first voice note
    "h11",
    "apscheduler",  # the scheduler's timers: the first job arms them
    "html2text",  # the first page fetched
    "playwright",
    "mcp",
    "opentelemetry",
    "discord",
    "slack_bolt",
    "slack_sdk",
    "microsoft_agents",
    "nio",  # matrix-nio
    "vodozemac",
    "aioimaplib",
    "aiosmtplib",
    "jinja2",  # the console's and the web chat's pages
    "markdown_it",
    "trafilatura",
    "pypdf",
    "docx",
    "openpyxl",
    "pptx",
    "botocore",  # redis.credentials = aws-iam or azure-entra only
    "redis_entraid",
    "msal",
    "azure",
    "gateway.store.redis_credentials",
    "tools.shell.safety",  # the classifier: the first command judged
    "tools.shell.readonly",
    "tools.shell.terminal.docker",  # only the configured backend (sandbox)
    "tools.shell.terminal.ssh",
    "tools.shell.terminal.local",
    "tools.web.browser.manager",  # only with the browser enabled (off here) and Chromium found
    "tools.web.browser.guardproxy",
    "gateway.web.console",  # only with an operator token in [web]
    # The platforms the config names nowhere: not their adapters, nor their settings models.
    "adapters.slack",
    "adapters.discord",
    "adapters.whatsapp",
    "adapters.teams",
    "adapters.mattermost",
    "adapters.matrix",
    "adapters.email",
    "adapters.web",
    "adapters.api",
)

# Runs the real CLI; on SIGUSR1 it writes the modules it holds, the way a debugger would.
_RUN_AND_REPORT = """
import json, os, signal, sys

def report(*_):
    with open(os.environ["MODULES_OUT"], "w") as out:
        json.dump(sorted(sys.modules), out)

signal.signal(signal.SIGUSR1, report)
from gateway.app.cli import main
sys.exit(main(["run"]))
"""


async def test_a_telegram_gateway_loads_only_what_it_runs(tmp_path: Path) -> None:
    import asyncio
    import os
    import signal
    import socket

    from tests.fakes.llm import ScriptedLLM
    from tests.fakes.telegram import FakeBotAPI

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = tmp_path / "modules.json"
    async with ScriptedLLM(record=False) as llm, FakeBotAPI() as tg:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
        env.update(
            CHATGATE_TELEGRAM__TOKEN=tg.token,
            CHATGATE_TELEGRAM__API_URL=tg.url,
            CHATGATE_LLM__BASE_URL=llm.url,
            CHATGATE_LLM__MODEL="fake-model",
            CHATGATE_DATA_DIR=str(tmp_path / "data"),
            CHATGATE_HTTP__PORT=str(port),
            CHATGATE_LOG_LEVEL="WARNING",
            CHATGATE_BROWSER__ENABLED="false",
            MODULES_OUT=str(report),
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _RUN_AND_REPORT, env=env, cwd=ROOT
        )
        try:
            tg.push_message("hello", chat_id=7, user_id=7)
            await tg.wait_sent(1, chat_id=7, within=60)
            proc.send_signal(signal.SIGUSR1)
            for _ in range(600):
                if report.exists() and report.stat().st_size:
                    break
                await asyncio.sleep(0.05)
        finally:
            proc.terminate()
            await proc.wait()
    loaded = set(json.loads(report.read_text()))
    assert "adapters.telegram.adapter" in loaded  # it did run the platform
    found = {m for m in loaded if m.startswith(NOT_LOADED_BY_A_TELEGRAM_GATEWAY)}
    assert found == set()


def _patterns(model: type[BaseModel], seen: set[type[BaseModel]]) -> Iterator[tuple[str, str]]:
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        for meta in field.metadata:
            pattern = getattr(meta, "pattern", None)
            if isinstance(pattern, str):
                yield f"{model.__name__}.{name}", pattern
        for arg in _classes_in(field.annotation):
            if issubclass(arg, BaseModel):
                yield from _patterns(arg, seen)


def _classes_in(annotation: object) -> Iterator[type]:
    if isinstance(annotation, type):
        yield annotation
    for arg in get_args(annotation):
        yield from _classes_in(arg)


def test_no_settings_pattern_builds_unicode_tables_at_start() -> None:
    """A string pattern runs on pydantic's Rust regex engine, which compiles Unicode classes
    (\\w, \\d, \\s, \\b) into tables of several MB when the settings model is built; such
    patterns are given compiled, which runs them on Python's re."""
    from adapters.registry import settings_sections
    from gateway.config import settings_model

    unicode_class = re.compile(r"\\[wWdDsSbBp]")
    heavy = {
        where: pattern
        for where, pattern in _patterns(settings_model(settings_sections()), set())
        if unicode_class.search(pattern)
    }
    assert heavy == {}
