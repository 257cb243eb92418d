"""`chatgate usage [--by user|chat|job|profile|model] [--since DAY] [--until DAY]`: spending
from the store as a table, no running gateway needed (with the embedded store, none may run:
it serves one process)."""

from __future__ import annotations

import argparse
import sys
from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.budgets.ledger import Spend
    from gateway.budgets.periods import Periods
    from gateway.config import Settings

# Only the parser is built at import (every `chatgate` call builds it); the command imports
# the ledger and the store when it runs. The ledger's dimensions, less "all".

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
BY = ("user", "chat", "job", "profile", "model")


def register(subparsers: Any) -> None:
    """Add `usage` to the `chatgate` argument parser (through gateway.app.cli.EXTRA_COMMANDS)."""
    usage = subparsers.add_parser("usage", help="tokens and cost per person, chat, job or model")
    usage.add_argument("--by", choices=BY, default="user", help="group by (default: user)")
    usage.add_argument(
        "--since", help="first day, YYYY-MM-DD (default: the 1st of this month)", default=""
    )
    usage.add_argument("--until", help="last day, YYYY-MM-DD (default: today)", default="")
    usage.set_defaults(func=cmd_usage)


def cmd_usage(settings: Settings, args: argparse.Namespace) -> int:
    import asyncio

    from gateway.budgets.periods import Periods

    periods = Periods(settings.budgets.timezone)
    today = periods.now().astimezone(periods.zone).date()
    try:
        since = date.fromisoformat(args.since) if args.since else today.replace(day=1)
        until = date.fromisoformat(args.until) if args.until else today
    except ValueError:
        print("chatgate usage: write days as YYYY-MM-DD, e.g. --since 2025-01-31", file=sys.stderr)
        return EXIT_USAGE
    if since > until:
        print(f"chatgate usage: --since {since} is after --until {until}", file=sys.stderr)
        return EXIT_USAGE
    return asyncio.run(_report(settings, periods, args.by, since, until))


async def _report(settings: Settings, periods: Periods, by: str, since: date, until: date) -> int:
    from gateway.budgets.ledger import UsageLedger
    from gateway.store import StoreLocked, StoreUnavailable, open_store

    try:
        store = open_store(settings)
    except StoreLocked as exc:
        print(
            f"chatgate usage: {exc}. Stop the running gateway to read the embedded store, or "
            "use /usage in a chat.",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        ledger = UsageLedger(store, periods, keep_days=settings.budgets.keep_days)
        table = await ledger.table(periods.days(since, until), by)
    except StoreUnavailable as exc:
        print(f"chatgate usage: the store is unreachable: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        await store.close()
    print(f"usage from {since} to {until} ({periods.timezone}), by {by}")
    if not table:
        print("no usage recorded")
        return EXIT_OK
    print_table(by, table)
    return EXIT_OK


def print_table(by: str, table: dict[str, Spend]) -> None:
    from gateway.budgets.ledger import Spend

    rows = sorted(table.items(), key=lambda item: (-item[1].micro_usd, -item[1].tokens, item[0]))
    total = sum((spend for _, spend in rows), Spend())
    width = max(len(by), 5, *(len(ident) for ident, _ in rows))
    print(f"{by.upper():<{width}}  {'TOKENS IN':>12}  {'TOKENS OUT':>12}  {'COST USD':>12}")
    for ident, spend in [*rows, ("TOTAL", total)]:
        print(
            f"{ident:<{width}}  {spend.tokens_in:>12,}  {spend.tokens_out:>12,}  "
            f"{spend.usd:>12,.4f}"
        )
