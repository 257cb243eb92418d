"""What each console page shows, read from the store and the running parts: plain data for the
templates (gateway/web/templates/parts/), gathered fresh for every render and live update."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.approvals.seals import EntrySigner
from gateway.approvals.service import AUDIT, ApprovalService
from gateway.budgets.ledger import DIMENSIONS, Spend, UsageLedger
from gateway.budgets.periods import Periods
from gateway.config import Settings
from gateway.intake.pairing import Pairing
from gateway.llm.types import Message
from gateway.runtime.metrics import Metrics
from gateway.scheduling.jobs import JobSpec
from gateway.scheduling.scheduler import Scheduler
from gateway.scheduling.times import local_time
from gateway.sdk.channels import Adapter, ReportsState
from gateway.sessions.history import SessionStore
from gateway.sessions.key import SessionKey
from gateway.store import keys
from gateway.store.base import Store
from gateway.web.console.dead_letters import dead_letter_rows
from gateway.web.console.errors import RecentErrors
from gateway.web.console.health import LLMHealth
from gateway.web.info import InfoSource

AUDIT_SHOWN = 100
USAGE_BY = tuple(d for d in DIMENSIONS if d != "all")
CHATS_SHOWN = 100
SESSIONS_SHOWN = 20  # per chat
TOOL_OUTPUT_CHARS = 2000


@dataclass(frozen=True)
class ConsoleParts:
    """The running gateway, as the console reads it (built by the composition root)."""

    settings: Settings
    store: Store
    instance_id: str
    approvals: ApprovalService
    pairing: Pairing
    scheduler: Scheduler
    sessions: SessionStore
    metrics: Metrics
    adapters: list[Adapter]
    info: InfoSource
    signer: EntrySigner  # seals the console's sessions and the sign-in links it makes


class Views:
    def __init__(self, parts: ConsoleParts, errors: RecentErrors, health: LLMHealth) -> None:
        self._p = parts
        self._errors = errors
        self._health = health

    async def data(self, page: str, query: Mapping[str, str]) -> dict[str, Any]:
        loader = getattr(self, f"_{page}")
        result: dict[str, Any] = await loader(query)
        return result

    # -- overview -----------------------------------------------------------------------------

    async def _overview(self, query: Mapping[str, str]) -> dict[str, Any]:
        p = self._p
        now = time.time()
        fresh = max(3 * p.settings.router.lease_ttl, 15)
        replicas = []
        for instance, raw in sorted((await p.store.hgetall(keys.REPLICAS)).items()):
            beat = json.loads(raw)
            age = now - float(beat.get("ts", 0))
            replicas.append(
                {
                    "id": instance,
                    "here": instance == p.instance_id,
                    "alive": age <= fresh,
                    "beat": float(beat.get("ts", 0)),
                    "sessions": int(beat.get("sessions", 0)),
                }
            )
        replicas.sort(key=lambda r: (not r["alive"], r["id"]))
        pending, waited = await p.store.inbox_stats()
        leader = await p.store.lease_owner(keys.leader("scheduler"))
        m = p.metrics
        return {
            "replicas": replicas,
            "adapters": [await _adapter_row(a) for a in p.adapters],
            "queue": {
                "pending": pending,
                "waited": waited,
                "messages": m.total("messages_total"),
                "turns_ok": m.total("turns_total", status="ok"),
                "turns_error": m.total("turns_total", status="error"),
                "refused": m.total("refused_total"),
                "scheduler_leader": (leader or "").split(":")[0] or "none",
                "approvals_pending": len(await p.store.hgetall(keys.APPROVALS_PENDING)),
                "dead_letters": len(await p.store.hgetall(keys.DEAD_LETTERS)),
            },
            "llm": self._health.snapshot(),
            "llm_where": f"{self._health.base_url} ({self._health.model})",
            "errors": await self._errors.recent(30),
        }

    # -- approvals ------------------------------------------------------------------------------

    async def _approvals(self, query: Mapping[str, str]) -> dict[str, Any]:
        p = self._p
        pending = await p.approvals.pending_requests()
        outcome = query.get("outcome", "")
        text = query.get("q", "").strip().lower()
        # Unfiltered, only the newest entries are read; a filter searches the whole log.
        start = 0 if (outcome or text) else -AUDIT_SHOWN
        shown = []
        for raw in reversed(await p.store.list_range(AUDIT, start, -1)):
            entry = json.loads(raw)
            if outcome and entry.get("outcome") != outcome:
                continue
            if text and text not in raw.lower():
                continue
            shown.append(entry)
            if len(shown) >= AUDIT_SHOWN:
                break
        return {
            "pending": pending,
            "audit": shown,
            "filters": {"outcome": outcome, "q": query.get("q", "")},
        }

    # -- access (pairing) -----------------------------------------------------------------------

    async def _access(self, query: Mapping[str, str]) -> dict[str, Any]:
        book = self._p.pairing.book
        return {
            "pairing_on": self._p.settings.access.unknown == "pair",
            "pairing_codes": await book.pending(),
            "pairing_grants": await book.grants(),
        }

    # -- scheduler ------------------------------------------------------------------------------

    async def _scheduler(self, query: Mapping[str, str]) -> dict[str, Any]:
        jobs = []
        for spec, state in await self._p.scheduler.jobs(None):
            due = None if spec.paused else spec.due(state)
            jobs.append(
                {"spec": spec, "next": due, "local": _local(due, spec), "failing": state.failing}
            )
        return {"jobs": jobs}

    async def _job(self, query: Mapping[str, str]) -> dict[str, Any]:
        job_id = query.get("key", "")
        book = self._p.scheduler.book
        spec: JobSpec | None = await book.get(job_id)
        state = await book.state(job_id) if spec else None
        runs = list(reversed(await book.runs(job_id)))
        due = None if spec is None or spec.paused or state is None else spec.due(state)
        return {
            "job_id": job_id,
            "spec": spec,
            "next": due,
            "local": _local(due, spec),
            "runs": runs,
            "failing": state.failing if state is not None else None,
        }

    # -- conversations ----------------------------------------------------------------------------

    async def _conversations(self, query: Mapping[str, str]) -> dict[str, Any]:
        sessions = self._p.sessions
        platform = query.get("platform", "")
        text = query.get("q", "").strip().lower()
        chats = sorted((await sessions.chats()).items(), key=lambda kv: -kv[1])
        platforms = sorted({scope.split(":", 1)[0] for scope, _ in chats})
        rows = []
        for scope, _began in chats:
            if platform and not scope.startswith(f"{platform}:"):
                continue
            if text and text not in scope.lower():
                continue
            found = [
                {"key": name, "began": began}
                for name, began in sorted(
                    (await sessions.sessions_of(scope)).items(), key=lambda kv: -kv[1]
                )[:SESSIONS_SHOWN]
            ]
            if found:
                rows.append({"scope": scope, "sessions": found})
            if len(rows) >= CHATS_SHOWN:
                break
        return {
            "chats": rows,
            "platforms": platforms,
            "filters": {"platform": platform, "q": query.get("q", "")},
        }

    async def _conversation(self, query: Mapping[str, str]) -> dict[str, Any]:
        name = query.get("key", "")
        key = SessionKey.parse(name) if name.count(":") >= 1 else None
        record = await self._p.sessions.load(key) if key is not None else None
        return {
            "session": name,
            "known": record is not None and not record.is_new,
            "record": record,
            "entries": [_entry(m) for m in record.messages] if record is not None else [],
        }

    # -- usage --------------------------------------------------------------------------------

    async def _usage(self, query: Mapping[str, str]) -> dict[str, Any]:
        budgets = self._p.settings.budgets
        by = query.get("by", "user")
        by = by if by in USAGE_BY else "user"
        periods = Periods(budgets.timezone)
        ledger = UsageLedger(self._p.store, periods, keep_days=budgets.keep_days)
        tables = []
        for label, period in (
            ("Today", periods.current("day")),
            ("This month", periods.current("month")),
        ):
            spent = await ledger.table([period], by)
            rows = sorted(spent.items(), key=lambda kv: (-kv[1].micro_usd, -kv[1].tokens, kv[0]))
            total = sum((spend for _, spend in rows), Spend())
            tables.append({"label": label, "period": period, "rows": rows, "total": total})
        limits = [
            (name.replace("_", " "), value)
            for name, value in budgets.model_dump().items()
            if name.startswith(("per_", "global_")) and value
        ]
        return {
            "by": by,
            "choices": USAGE_BY,
            "tables": tables,
            "limits": limits,
            "tz": periods.timezone,
        }

    # -- tools --------------------------------------------------------------------------------

    async def _deadletters(self, query: Mapping[str, str]) -> dict[str, Any]:
        return await dead_letter_rows(self._p.store)

    async def _tools(self, query: Mapping[str, str]) -> dict[str, Any]:
        return {"tables": self._p.info()}


def _local(due: datetime | None, spec: JobSpec | None) -> str:
    return "" if due is None or spec is None else local_time(due, spec.schedule.tz)


async def _adapter_row(adapter: Adapter) -> dict[str, Any]:
    state = await adapter.state() if isinstance(adapter, ReportsState) else "running"
    caps = adapter.capabilities
    features = [
        name
        for name, on in (
            ("edits", caps.can_edit),
            ("buttons", caps.buttons),
            ("threads", caps.threads),
            ("files", caps.max_upload_bytes > 0),
        )
        if on
    ]
    return {"platform": adapter.platform, "state": str(state), "features": ", ".join(features)}


def _entry(message: Message) -> dict[str, Any]:
    """One history message for the conversation page: who, text, tool calls."""
    content = message.get("content")
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                parts.append(f"[{part.get('type', 'part') if isinstance(part, dict) else 'part'}]")
        text = "\n".join(parts)
    else:
        text = str(content or "")
    role = str(message.get("role", ""))
    if role == "tool" and len(text) > TOOL_OUTPUT_CHARS:
        text = text[:TOOL_OUTPUT_CHARS] + f"\n… ({len(text) - TOOL_OUTPUT_CHARS:,} more characters)"
    calls = [
        {
            "name": call.get("function", {}).get("name", ""),
            "arguments": call.get("function", {}).get("arguments", ""),
        }
        for call in message.get("tool_calls") or ()
    ]
    return {"role": role, "text": text, "calls": calls}
