"""The /metrics text: Prometheus' own parser reads it, labels are escaped, histograms add up;
and the Grafana dashboard in deploy/ only uses metrics the gateway exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gateway.runtime.metrics import FAMILIES, PREFIX, Metrics

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "chatgate-dashboard.json"


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_render_is_valid_exposition_with_help_type_and_labels() -> None:
    m = Metrics()
    m.inc("messages_total", platform="slack")
    m.inc("messages_total", 2, platform="telegram")
    m.inc("tool_calls_total", tool="shell", outcome="timeout")
    m.gauge("turns_running", 3)
    m.observe("llm_request_seconds", 0.3, provider="p", model='we"ird\\name', outcome="ok")
    m.observe("llm_request_seconds", 7.0, provider="p", model='we"ird\\name', outcome="ok")
    m.inc("llm_cost_usd_total", 0.000125, provider="p", model="m")
    text = m.render()
    assert "# HELP chatgate_messages_total Messages submitted, by platform." in text
    assert "# TYPE chatgate_llm_request_seconds histogram" in text
    parsed = families(text)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in parsed.values()
        for s in f.samples  # type: ignore[attr-defined]
    }
    assert samples[("chatgate_messages_total", (("platform", "telegram"),))] == 2
    assert samples[("chatgate_turns_running", ())] == 3
    weird = (("model", 'we"ird\\name'), ("outcome", "ok"), ("provider", "p"))
    assert samples[("chatgate_llm_request_seconds_count", weird)] == 2
    assert samples[("chatgate_llm_request_seconds_sum", weird)] == 7.3
    bucket = tuple(sorted((*weird, ("le", "0.5"))))
    assert samples[("chatgate_llm_request_seconds_bucket", bucket)] == 1
    assert (
        samples[("chatgate_llm_request_seconds_bucket", tuple(sorted((*weird, ("le", "+Inf")))))]
        == 2
    )
    assert samples[("chatgate_llm_cost_usd_total", (("model", "m"), ("provider", "p")))] == 0.000125


def test_collectors_run_at_scrape_and_a_broken_one_does_not_break_it() -> None:
    m = Metrics()
    depth = [4]
    m.add_collector(lambda metrics: metrics.gauge("turns_running", depth[0]))
    m.add_collector(lambda metrics: 1 / 0)  # type: ignore[func-returns-value]
    assert "chatgate_turns_running 4" in m.render()
    depth[0] = 1
    assert "chatgate_turns_running 1" in m.render()


def test_undeclared_names_are_still_exported() -> None:
    m = Metrics()
    m.inc("something_new_total")
    assert "# TYPE chatgate_something_new_total untyped" in m.render()


def test_every_metric_the_dashboard_uses_is_exported() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    used = {name for expr in exprs for name in re.findall(rf"{PREFIX}[a-z_]+", expr)}
    exported = set()
    for family in FAMILIES.values():
        base = PREFIX + family.name
        exported.add(base)
        if family.kind == "histogram":
            exported |= {base + "_bucket", base + "_sum", base + "_count"}
    assert used - exported == set()
    # And each declared family has a panel, so nothing exported goes unseen.
    shown = {re.sub(r"_(bucket|sum|count)$", "", name) for name in used}
    assert {PREFIX + name for name in FAMILIES} - shown == set()


def test_every_metric_the_code_records_is_declared() -> None:
    root = Path(__file__).parents[2]
    call = re.compile(r"\.(?:inc|gauge|observe)\(\s*\"([a-z_]+)\"")
    used = {
        name
        for package in ("gateway", "adapters", "tools")
        for path in (root / package).rglob("*.py")
        for name in call.findall(path.read_text(encoding="utf-8"))
    }
    assert "turns_total" in used and "platform_rate_limited_total" in used
    assert used - set(FAMILIES) == set()
