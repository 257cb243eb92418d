"""What one `chatgate doctor` check reports, and the probe the platforms' checks share.

Kept apart from gateway/app/doctor.py so that platform plugins can describe their check
without importing the whole doctor (and the LLM client with it) when the CLI starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    fix: str = ""


async def probe_api(
    http: httpx.AsyncClient,
    name: str,
    method: str,
    url: str,
    headers: dict[str, str],
    field: str,
    fix: str,
) -> CheckResult:
    """Call a platform's "who am I" endpoint with its token: pass when it answers 200 (and,
    for APIs that wrap results, `ok`), naming the bot from `field` of the reply."""
    import httpx  # only `chatgate doctor` probes; other commands need not load httpx

    try:
        response = await http.request(method, url, headers=headers)
        data = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        # The URL may hold the token (Telegram), so only the error type is shown.
        return CheckResult(name, False, f"API unreachable ({type(exc).__name__})", fix)
    payload = data.get("result", data) if isinstance(data, dict) else {}
    ok = response.status_code == 200 and isinstance(payload, dict) and data.get("ok", True)
    if not ok:
        return CheckResult(name, False, f"token rejected (HTTP {response.status_code})", fix)
    return CheckResult(name, True, f"token valid, bot {payload.get(field, '?')}")
