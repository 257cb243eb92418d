"""The /metrics text: Prometheus' own parser reads it, labels are escaped, histograms add up,
the process and GC collectors are there; the Grafana dashboard in deploy/ only uses metrics
/metrics carries; and every recording in the code matches its declaration."""

from __future__ import annotations

import ast
import json
import logging
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.runtime.metrics import FAMILIES, PREFIX, Metrics

ROOT = Path(__file__).parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "chatgate-dashboard.json"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def exported_names(text: str) -> set[str]:
    """Every series name the page can carry: a labelled family nobody recorded yet has its
    HELP and TYPE lines but no sample, and still counts."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {s.name for s in family.samples}
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names |= {family.name + suffix for suffix in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def dashboard_names() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    return {name for expr in exprs for name in re.findall(rf"{PREFIX}[a-z_]+", expr)}


def test_render_is_valid_exposition_with_help_type_and_labels() -> None:
    m = Metrics()
    m.inc("messages_total", platform="slack")
    m.inc("messages_total", 2, platform="telegram")
    m.inc("tool_calls_total", tool="shell", outcome="timeout")
    m.gauge("turns_running", 3)
    m.observe("llm_request_seconds", 0.3, provider="p", model='we"ird\\name', outcome="ok")
    m.observe("llm_request_seconds", 7.0, outcome="ok", model='we"ird\\name', provider="p")
    m.inc("llm_cost_usd_total", 0.000125, provider="p", model="m")
    text = m.render()
    assert "# HELP chatgate_messages_total Messages submitted, by platform." in text
    assert "# TYPE chatgate_llm_request_seconds histogram" in text
    parsed = samples(text)
    assert parsed[("chatgate_messages_total", (("platform", "telegram"),))] == 2
    assert parsed[("chatgate_turns_running", ())] == 3
    weird = (("model", 'we"ird\\name'), ("outcome", "ok"), ("provider", "p"))
    # The same series whatever order the labels were given in.
    assert parsed[("chatgate_llm_request_seconds_count", weird)] == 2
    assert parsed[("chatgate_llm_request_seconds_sum", weird)] == 7.3
    bucket = tuple(sorted((*weird, ("le", "0.5"))))
    assert parsed[("chatgate_llm_request_seconds_bucket", bucket)] == 1
    assert (
        parsed[("chatgate_llm_request_seconds_bucket", tuple(sorted((*weird, ("le", "+Inf")))))]
        == 2
    )
    assert parsed[("chatgate_llm_cost_usd_total", (("model", "m"), ("provider", "p")))] == 0.000125
    # What the console and the tests read back.
    assert m.total("messages_total") == 3 and m.counter("messages_total", platform="slack") == 1
    assert m.histogram_count(
        "llm_request_seconds", provider="p", model='we"ird\\name', outcome="ok"
    )
    assert m.counter("turns_running") == 3


def test_the_process_and_gc_collectors_are_exported() -> None:
    names = exported_names(Metrics().render())
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total"} <= names
    assert "python_gc_collections_total" in names


def test_two_registries_count_apart() -> None:
    first, second = Metrics(), Metrics()
    first.inc("duplicates_total")
    assert first.counter("duplicates_total") == 1 and second.counter("duplicates_total") == 0


def test_collectors_run_at_scrape_and_a_broken_one_does_not_break_it() -> None:
    m = Metrics()
    depth = [4]
    m.add_collector(lambda metrics: metrics.gauge("turns_running", depth[0]))

    def broken(metrics: Metrics) -> None:
        raise ZeroDivisionError

    m.add_collector(broken)
    assert samples(m.render())[("chatgate_turns_running", ())] == 4
    depth[0] = 1
    assert samples(m.render())[("chatgate_turns_running", ())] == 1


def test_undeclared_names_are_still_exported() -> None:
    m = Metrics()
    m.inc("something_new_total")
    m.observe("something_new_seconds", 0.2, where="x")
    text = m.render()
    assert "# TYPE chatgate_something_new_total untyped" in text
    assert samples(text)[("chatgate_something_new_seconds_count", (("where", "x"),))] == 1


def test_a_recording_that_does_not_fit_its_declaration_is_dropped_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    m = Metrics()
    with caplog.at_level(logging.ERROR, "gateway.runtime.metrics"):
        for _ in range(3):
            m.inc("messages_total", chat="c1")  # declared with `platform`
        m.observe("messages_total", 1.0, platform="x")  # a counter observes nothing
        m.inc("messages_total", platform="x")
    assert m.counter("messages_total", platform="x") == 1
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2  # once per wrong recording, not once per call
    assert "wrong labels name=messages_total" in logged[0]


def test_every_metric_the_dashboard_uses_is_on_the_metrics_page() -> None:
    """Parsed from the text /metrics serves, as Prometheus reads it (tests/e2e/
    test_observability.py checks the same on a running gateway's /metrics)."""
    used = dashboard_names()
    assert used - exported_names(Metrics().render()) == set()
    # And each declared family has a panel, so nothing exported goes unseen.
    shown = {re.sub(r"_(bucket|sum|count)$", "", name) for name in used}
    assert {PREFIX + name for name in FAMILIES} - shown == set()


def test_counters_are_named_as_prometheus_client_exports_them() -> None:
    """prometheus_client adds `_total` to a counter's name that lacks it: the dashboard's
    names hold only while every declared counter ends in it."""
    assert [
        f.name for f in FAMILIES.values() if f.kind == "counter" and not f.name.endswith("_total")
    ] == []


def _recordings() -> list[tuple[str, str, set[str]]]:
    """(where, metric, label names) of each `.inc/.gauge/.observe("name", ..., label=...)`."""
    found = []
    for package in ("gateway", "adapters", "tools"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("inc", "gauge", "observe")
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    labels = {k.arg for k in node.keywords if k.arg is not None}
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.append((where, node.args[0].value, labels))
    return found


def test_every_metric_the_code_records_is_declared_with_its_labels() -> None:
    recorded = _recordings()
    names = {name for _, name, _ in recorded}
    assert "turns_total" in names and "platform_rate_limited_total" in names
    assert names - set(FAMILIES) == set()
    wrong = [
        f"{where} {name}{sorted(labels)} declared {list(FAMILIES[name].labels)}"
        for where, name, labels in recorded
        if labels != set(FAMILIES[name].labels)
    ]
    assert wrong == []
