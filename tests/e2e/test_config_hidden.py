"""Issue 30 finding 3, end to end: `chatgate --config FILE run` (no CHATGATE_CONFIG). The config
file and the env file beside it sit under a path the sandbox mounts and are readable by the
user commands run as (an operator's slip, or a non-root gateway); a command reading them asks
first, and even approved it finds them hidden."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_approvals_telegram import ALICE, buttons
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.fakes.telegram import FakeBotAPI
from tools.shell.terminal.sandbox import SandboxBackend

pytestmark = pytest.mark.e2e

CONFIG_SECRET = "CONFIG-SECRET-0123456789"
ENV_SECRET = "ENVFILE-SECRET-0123456789"


async def test_the_config_given_with_the_flag_is_hidden_and_asks(
    open_dir: Path, llm: ScriptedLLM, tg: FakeBotAPI, make_sandbox: Callable[..., SandboxBackend]
) -> None:
    make_sandbox()  # skips when bwrap cannot sandbox here
    etc = open_dir / "etc" / "chatgate"
    etc.mkdir(parents=True)
    for path in (open_dir / "etc", etc):
        path.chmod(0o755)
    config = etc / "chatgate.toml"
    config.write_text(
        f'[llm]\nbase_url = "{llm.url}"\nmodel = "fake-model"\napi_key = "{CONFIG_SECRET}"\n'
        f'[tools.terminal.sandbox]\nro_paths = ["{open_dir / "etc"}"]\n'
    )
    env_file = etc / "env"
    env_file.write_text(f"CHATGATE_APPROVALS__SECRET={ENV_SECRET}\n")
    for path in (config, env_file):
        path.chmod(0o644)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env.update(
        CHATGATE_TELEGRAM__TOKEN=tg.token,
        CHATGATE_TELEGRAM__API_URL=tg.url,
        CHATGATE_TELEGRAM__POLL_TIMEOUT="1",
        CHATGATE_HTTP__ENABLED="false",
        CHATGATE_DATA_DIR=str(open_dir / "data"),
    )
    command = f"cat {config}; cat {env_file}"
    llm.push(Reply.call("shell", command=command), Reply.text("Read them."))
    log = (open_dir / "gateway.log").open("ab")  # read it when this test fails
    gateway = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.app.cli",
        "--config",
        str(config),
        "run",
        env=env,
        cwd=open_dir,
        stdout=log,
        stderr=log,
    )
    try:
        tg.push_message("show me the config", user_id=ALICE)
        [prompt] = await tg.wait_sent(1, within=30)
        assert "Approval needed" in prompt.text, prompt.text
        assert "the gateway's config file" in prompt.text
        tg.push_press(buttons(prompt)["Approve once"], on=prompt.result, user_id=ALICE)
        await tg.wait_for(lambda: "Read them." in tg.texts(), within=30)
    finally:
        gateway.send_signal(signal.SIGTERM)
        await asyncio.wait_for(gateway.wait(), 20)
        log.close()
    [output] = tool_results(llm.requests[-1])
    assert CONFIG_SECRET not in output and ENV_SECRET not in output
    # Both are covered (an empty directory, a file mount nothing can open).
    assert output.count(": Permission denied") == 2, output
