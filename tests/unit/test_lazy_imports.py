"""What a process loads is what it runs: `chatgate --help` builds its parser without pydantic,
the platforms or an HTTP client, and listing the platforms loads no platform's SDK or the web
chat's pages. Checked in a fresh interpreter, where nothing else has imported them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
