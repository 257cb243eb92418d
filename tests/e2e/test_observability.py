"""Observability end to end: /metrics after a scripted conversation (a tool call, an approval,
a fallback, a scheduled run) says exactly what happened; OpenTelemetry spans nest turn ->
LLM calls and tools; without the OpenTelemetry package nothing breaks."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from gateway.runtime.otel import Tracing
from gateway.scheduling.jobs import JobKind
from tests.e2e.test_approvals import add_danger_tool, button, press, prompt_of
from tests.fakes.llm import Reply, ScriptedLLM
from tests.harness import gateway_settings, running_gateway
from tests.unit.test_metrics import dashboard_names, exported_names

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
async def primary() -> AsyncIterator[ScriptedLLM]:
    async with ScriptedLLM(models=("big-model",)) as server:
        yield server


def scrape(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, key), v in samples.items() if n == name and want <= set(key))


async def test_metrics_after_a_scripted_conversation_match_what_happened(
    tmp_path: Path, llm: ScriptedLLM, primary: ScriptedLLM
) -> None:
    settings = gateway_settings(
        tmp_path,
        llm.url,
        http={"enabled": True, "port": 0},
        llm={
            "providers": {
                "router": {
                    "base_url": primary.url,
                    "model": "big-model",
                    "price_in_per_mtok": 2.0,
                    "price_out_per_mtok": 4.0,
                }
            }
        },
        profiles={
            "main": {"provider": "router", "fallback": ["default"]},
            "bind": [{"profile": "main", "platform": "console", "chat": "chat1"}],
        },
        scheduler={"leader_ttl": 1.0, "min_interval_seconds": 1.0},
        access={"admins": ["console:alice"], "rate_limit_per_minute": 0},
    )
    provider = TracerProvider()
    spans = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    async with running_gateway(settings, tracing=Tracing(provider, owned=False)) as gw:
        ran = add_danger_tool(gw)
        # Turn 1 on the primary: a tool call that needs an approval, then the answer.
        primary.push(
            Reply(tool_calls=[("danger", {"command": "make clean"})], usage=(100, 10)),
            Reply.text("Cleaned.", usage=(150, 20)),
        )
        turn = await gw.submit("clean up")
        await press(gw, button(await prompt_of(gw), "Approve once"))
        assert (await turn.done).reply == "Cleaned." and ran == ["make clean"]
        # Turn 2: the primary is down, the backup answers after a todo call.
        primary.push(Reply.error(500, "down"), Reply.error(500, "down"), Reply.error(500, "down"))
        llm.push(
            Reply(tool_calls=[("todo", {"items": []})], usage=(50, 5)),
            Reply.text("Fine.", usage=(60, 6)),
        )
        assert (await gw.say("plan")).reply == "Fine."
        # Turn 3 in another chat (the default profile), unknown tool then the answer.
        llm.push(Reply.call("nonexistent_tool"), Reply.text("Sorry.", usage=(70, 7)))
        assert (await gw.say("hi", chat_id="other")).reply == "Sorry."
        # A scheduled reminder.
        await gw.app.scheduler.create(
            kind=JobKind.MESSAGE, text="tea", when="1s", chat=gw.console.chat, user=gw.console.user
        )
        for _ in range(200):
            if "tea" in gw.texts:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # the run is counted after its delivery
        port = gw.app.http.port if gw.app.http else None
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            page = await http.get("/metrics")
        sent = len(gw.console.sent)

    assert page.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    # Every name the Grafana dashboard queries is on the page, and prometheus_client's own
    # process and garbage-collector metrics are too.
    names = exported_names(page.text)
    assert dashboard_names() - names == set()
    assert {"process_resident_memory_bytes", "python_gc_collections_total"} <= names
    m = scrape(page.text)
    assert total(m, "chatgate_messages_total", platform="console") == 3
    assert total(m, "chatgate_turns_total", profile="main", status="ok") == 2
    assert total(m, "chatgate_turns_total", profile="default", status="ok") == 1
    assert total(m, "chatgate_turn_seconds_count") == 3
    assert total(m, "chatgate_turn_iterations_count") == 3
    assert total(m, "chatgate_turn_iterations_sum") == 6  # two model calls in each turn
    assert total(m, "chatgate_queue_wait_seconds_count") == 3
    assert total(m, "chatgate_tool_calls_total", tool="danger", outcome="ok") == 1
    assert total(m, "chatgate_tool_calls_total", tool="todo", outcome="ok") == 1
    assert total(m, "chatgate_tool_calls_total", tool="nonexistent_tool", outcome="refused") == 1
    assert total(m, "chatgate_tool_seconds_count") == 3
    big = {"provider": "router", "model": "big-model"}
    small = {"provider": "default", "model": "fake-model"}
    assert total(m, "chatgate_llm_tokens_total", kind="prompt", **big) == 250
    assert total(m, "chatgate_llm_tokens_total", kind="completion", **big) == 30
    assert total(m, "chatgate_llm_tokens_total", kind="prompt", **small) == 50 + 60 + 10 + 70
    assert total(m, "chatgate_llm_cost_usd_total", **big) == pytest.approx((250 * 2 + 30 * 4) / 1e6)
    assert total(m, "chatgate_llm_request_seconds_count", outcome="ok", **big) == 2
    assert total(m, "chatgate_llm_request_seconds_count", outcome="ok", **small) == 4
    assert total(m, "chatgate_llm_cost_usd_total", **small) == 0  # no price set
    assert total(m, "chatgate_llm_errors_total", kind="server_error", **big) == 1
    assert total(m, "chatgate_llm_fallbacks_total", reason="server_error") == 1
    assert total(m, "chatgate_llm_breaker_open", target="router") == 1
    assert total(m, "chatgate_approvals_decided_total", outcome="once") == 1
    assert total(m, "chatgate_approval_decision_seconds_count") == 1
    assert total(m, "chatgate_approvals_pending") == 0
    assert total(m, "chatgate_scheduler_runs_total", kind="message", status="delivered") == 1
    assert total(m, "chatgate_platform_sends_total", platform="console", outcome="ok") == sent

    finished = spans.get_finished_spans()
    turns = [s for s in finished if s.name == "turn"]
    assert len(turns) == 3
    by_turn = {t.context.span_id: t for t in turns}
    llm_calls = [s for s in finished if s.name == "llm.call"]
    tools = [s for s in finished if s.name == "tool.call"]
    assert len(llm_calls) == 7 and len(tools) == 3  # one failed call on the primary
    for child in llm_calls + tools:
        assert child.parent is not None and child.parent.span_id in by_turn
    failed = [s for s in llm_calls if s.attributes and s.attributes.get("error.type")]
    assert [s.attributes["llm.model"] for s in failed if s.attributes] == ["big-model"]
    assert {t.attributes["profile"] for t in turns if t.attributes} == {"main", "default"}


async def test_no_opentelemetry_package_breaks_nothing(tmp_path: Path, llm: ScriptedLLM) -> None:
    """`chatgate ask` with otel.endpoint set, in a Python where `import opentelemetry` fails."""
    script = textwrap.dedent(
        """
        import sys

        class NoOpenTelemetry:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(f"No module named {name!r}")
                return None

        sys.meta_path.insert(0, NoOpenTelemetry())
        from gateway.app.cli import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env |= {
        "CHATGATE_DATA_DIR": str(tmp_path / "data"),
        "CHATGATE_LLM__BASE_URL": llm.url,
        "CHATGATE_LLM__MODEL": "fake-model",
        "CHATGATE_OTEL__ENDPOINT": "http://127.0.0.1:9/v1/traces",
        "CHATGATE_LOG_LEVEL": "WARNING",
    }
    llm.push(Reply.text("Still here."))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        "ask",
        "hello",
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "Still here."
    assert "Traceback" not in err.decode()


async def test_spans_reach_an_otlp_collector(tmp_path: Path, llm: ScriptedLLM) -> None:
    """The exporter built from `otel.endpoint` posts the turn's spans over OTLP/HTTP."""
    from aiohttp import web
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    received: list[Any] = []

    async def collect(request: web.Request) -> web.Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        received.append(message)
        return web.Response(content_type="application/x-protobuf", body=b"")

    app = web.Application()
    app.router.add_post("/v1/traces", collect)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        settings = gateway_settings(
            tmp_path,
            llm.url,
            otel={"endpoint": f"http://127.0.0.1:{port}/v1/traces", "service_name": "cg-test"},
        )
        async with running_gateway(settings) as gw:
            await gw.say("trace me")
        # Stopping the gateway flushes the batch (in a thread: give the server a moment).
        for _ in range(100):
            if received:
                break
            await asyncio.sleep(0.05)
    finally:
        await runner.cleanup()
    names = [
        span.name
        for message in received
        for resource in message.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert sorted(names) == ["llm.call", "turn"]
    service = received[0].resource_spans[0].resource.attributes
    assert any(a.key == "service.name" and a.value.string_value == "cg-test" for a in service)
