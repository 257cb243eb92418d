"""The `chatgate` command as a newcomer runs it: real subprocesses, real HTTP."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.llm import Reply, ScriptedLLM
from tests.harness import gateway_settings, running_gateway


def _env(tmp_path: Path, llm_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env.update(
        CHATGATE_DATA_DIR=str(tmp_path / "data"),
        CHATGATE_LLM__BASE_URL=llm_url,
        CHATGATE_LLM__MODEL="fake-model",
        CHATGATE_LLM__MAX_RETRIES="1",
        CHATGATE_LLM__RETRY_BASE_DELAY="0.01",
        **extra,
    )
    return env


async def chatgate(env: dict[str, str], *args: str, cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.app.cli",
        *args,
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_ask_prints_the_answer_and_history_persists(tmp_path: Path, llm: ScriptedLLM) -> None:
    env = _env(tmp_path, llm.url)
    llm.push(Reply.text("Paris."))
    code, out, err = await chatgate(env, "ask", "capital of France?", cwd=tmp_path)
    assert (code, out.strip()) == (0, "Paris."), err
    code, out, _ = await chatgate(env, "ask", "and of Spain?", cwd=tmp_path)
    assert code == 0 and out.strip() == "echo: and of Spain?"
    contents = [m.get("content") for m in llm.requests[-1]["messages"]]
    assert "capital of France?" in contents and "Paris." in contents


async def test_ask_with_llm_down_exits_1_with_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path, "http://127.0.0.1:9/v1")
    code, out, err = await chatgate(env, "ask", "hello", cwd=tmp_path)
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chatgate: ")


async def test_run_without_platform_says_how_to_configure(tmp_path: Path, llm: ScriptedLLM) -> None:
    code, _, err = await chatgate(_env(tmp_path, llm.url), "run", cwd=tmp_path)
    assert code == 2
    assert "No chat platform is configured" in err and "CHATGATE_TELEGRAM__TOKEN" in err


async def test_doctor_reports_each_check(tmp_path: Path, llm: ScriptedLLM) -> None:
    code, out, _ = await chatgate(_env(tmp_path, llm.url), "doctor", cwd=tmp_path)
    assert code == 0, out
    assert "pass  store:" in out and "pass  llm:" in out and "pass  browser:" in out
    code, out, _ = await chatgate(
        _env(tmp_path, "http://127.0.0.1:9/v1", CHATGATE_TELEGRAM__TOKEN="1:bad-token-value"),
        "doctor",
        cwd=tmp_path,
    )
    assert code == 1
    assert "FAIL  llm:" in out and "fix: check CHATGATE_LLM__BASE_URL" in out
    assert "FAIL  telegram:" in out and "bad-token-value" not in out


async def test_health_ready_and_metrics(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, http={"enabled": True, "port": 0})
    async with running_gateway(settings) as gw:
        await gw.say("hi")
        port = gw.app.http.port if gw.app.http else None
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await http.get("/healthz")).json() == {"status": "ok"}
            ready = await http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["ready"] is True
            metrics = (await http.get("/metrics")).text
    turns = {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == "chatgate_turns_total"
    }
    assert turns == {(("profile", "default"), ("status", "ok")): 1}


async def test_run_with_an_unreachable_platform_fails_in_one_line(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    env = _env(
        tmp_path,
        llm.url,
        CHATGATE_TELEGRAM__TOKEN="123:very-secret-token",
        CHATGATE_TELEGRAM__API_URL="http://127.0.0.1:9",
        CHATGATE_HTTP__ENABLED="false",
    )
    code, _, err = await chatgate(env, "run", cwd=tmp_path)
    assert code == 1
    assert "chatgate: could not start: cannot reach the Telegram Bot API" in err
    assert "Traceback" not in err and "Unclosed" not in err
    assert "very-secret-token" not in err
