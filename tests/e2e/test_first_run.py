"""A newcomer's first commands: with no model configured, chat/ask/run say so and how to set
one; `doctor` checks every provider, every model a profile names, and every binding."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.llm.firstrun import listening
from tests.e2e.test_cli import chatgate
from tests.fakes.llm import ScriptedLLM

DEFAULT_URL = "http://localhost:11434/v1"


def bare_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env["CHATGATE_DATA_DIR"] = str(tmp_path / "data")
    return env


@pytest.mark.parametrize("command", [["ask", "hello"], ["chat"], ["run"]])
async def test_no_model_configured_says_how_to_set_one(tmp_path: Path, command: list[str]) -> None:
    if listening(DEFAULT_URL):
        pytest.skip("something listens on localhost:11434 here, so a model is available")
    (tmp_path / "chatgate.toml").write_text('[llm]\ntool_call_format = "text"\n')
    code, out, err = await chatgate(bare_env(tmp_path), *command, cwd=tmp_path)
    assert code == 2 and out == ""
    assert err.startswith("No AI model is configured.")
    assert f"looks for Ollama at {DEFAULT_URL}, and nothing is listening there" in err
    assert "CHATGATE_LLM__BASE_URL" in err and "[llm] in chatgate.toml" in err
    assert "not reachable right now" not in err


async def test_a_configured_but_unreachable_model_is_not_first_run(tmp_path: Path) -> None:
    env = bare_env(tmp_path) | {"CHATGATE_LLM__BASE_URL": "http://127.0.0.1:9/v1"}
    code, _, err = await chatgate(env, "ask", "hello", cwd=tmp_path)
    assert code == 1 and "No AI model is configured" not in err


async def test_doctor_checks_providers_models_and_bindings(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    (tmp_path / "coding.md").write_text("Code well.", encoding="utf-8")
    (tmp_path / "chatgate.toml").write_text(
        f"""
[llm]
base_url = "{llm.url}"
model = "fake-model"
max_retries = 0

[llm.providers.offline]
base_url = "http://127.0.0.1:9/v1"
model = "gone"

[profiles.coding]
system_prompt_file = "coding.md"
provider = "offline"
fallback = ["default", "default/other-model"]

[[profiles.bind]]
profile = "coding"
platform = "slack"
chat = "C1"

[[profiles.bind]]
profile = "coding"
platform = "slack"
chat = "C1"
""",
        encoding="utf-8",
    )
    code, out, _ = await chatgate(bare_env(tmp_path), "doctor", cwd=tmp_path)
    assert code == 1
    lines = out.splitlines()
    assert any(
        line.startswith("pass  llm: ") and "'fake-model' available" in line for line in lines
    )
    assert any(
        line.startswith("FAIL  llm.providers.offline: http://127.0.0.1:9/v1") for line in lines
    )
    assert "      fix: check base_url, model and api_key in [llm.providers.offline]" in lines
    # The fake server answers any model; doctor asked it about this one too.
    assert any(
        line.startswith("pass  llm (other-model): ") and "'other-model' answers" in line
        for line in lines
    )
    assert (
        "pass  profile coding: offline/gone -> default/fake-model -> default/other-model; "
        f"prompt from {tmp_path / 'coding.md'} (10 chars)"
    ) in lines
    assert "pass  profiles.bind[0]: platform = 'slack', chat = 'C1' -> coding" in lines
    assert any(
        line.startswith("FAIL  profiles.bind[1]: profiles.bind[1] never applies") for line in lines
    )
