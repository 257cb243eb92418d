"""`chatgate cron list | remove ID | runs ID`: scheduled jobs straight from the store, no
running gateway needed (with the embedded store, none may be running: it serves one process).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.scheduling.jobs import JobBook

# Only the parser is built at import (every `chatgate` call builds it); each command imports
# what it runs.

EXIT_OK, EXIT_FAILED = 0, 1


def register(subparsers: Any) -> None:
    """Add `cron` to the `chatgate` argument parser (through gateway.app.cli.EXTRA_COMMANDS)."""
    cron = subparsers.add_parser("cron", help="list, remove and inspect scheduled jobs")
    sub = cron.add_subparsers(dest="cron_command", required=True)
    ls = sub.add_parser("list", help="every scheduled job, with its chat and next run")
    ls.add_argument("--chat", default="", help="only this chat, as platform:chat_id")
    ls.set_defaults(func=cmd_list)
    remove = sub.add_parser("remove", help="remove a job by id")
    remove.add_argument("id")
    remove.set_defaults(func=cmd_remove)
    runs = sub.add_parser("runs", help="a job's recent runs: time, status, message id, error")
    runs.add_argument("id")
    runs.set_defaults(func=cmd_runs)


def cmd_list(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.scheduling.jobs import describe_job

    async def body(book: JobBook) -> int:
        specs = await book.all()
        states = await book.states()
        shown = [s for s in specs if not args.chat or s.chat_scope == args.chat]
        for spec in shown:
            print(describe_job(spec, states.get(spec.id), with_chat=True))
        print(f"{len(shown)} job(s)")
        return EXIT_OK

    return _with_book(settings, body)


def cmd_remove(settings: Settings, args: argparse.Namespace) -> int:
    async def body(book: JobBook) -> int:
        spec = await book.get(args.id)
        if spec is None or not await book.remove(spec.id):
            print(
                f"chatgate cron: no job {args.id!r}; `chatgate cron list` shows the ids",
                file=sys.stderr,
            )
            return EXIT_FAILED
        await book.notify(spec.id)  # a running leader drops its timer at once
        print(f"removed job {spec.id} in {spec.target.address}: {spec.preview}")
        return EXIT_OK

    return _with_book(settings, body)


def cmd_runs(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.scheduling.jobs import describe_job
    from gateway.scheduling.times import local_time

    async def body(book: JobBook) -> int:
        spec = await book.get(args.id)
        runs = await book.runs(args.id)
        if spec is None and not runs:
            print(f"chatgate cron: no job {args.id!r} and no runs recorded", file=sys.stderr)
            return EXIT_FAILED
        tz = spec.schedule.tz if spec else None
        if spec is None:
            print(f"job {args.id} (removed or finished)")
        else:
            print(describe_job(spec, await book.state(spec.id), with_chat=True))
        if not runs:
            print("no runs yet")
        for run in runs:
            due = local_time(run.slot, tz) if tz else run.slot.isoformat()
            parts = [f"due {due}", run.status.value, f"message_id={run.message_id or '-'}"]
            parts.append(f"attempts={run.attempts}")
            if run.error:
                parts.append(f"error={run.error}")
            print("  ".join(parts))
        return EXIT_OK

    return _with_book(settings, body)


def _with_book(settings: Settings, body: Callable[[JobBook], Awaitable[int]]) -> int:
    import asyncio

    from gateway.scheduling.jobs import JobBook
    from gateway.store import StoreLocked, StoreUnavailable, open_store

    async def run() -> int:
        try:
            store = open_store(settings)
        except StoreLocked as exc:
            print(
                f"chatgate cron: {exc}. Stop the running gateway to use `chatgate cron` on the "
                "embedded store.",
                file=sys.stderr,
            )
            return EXIT_FAILED
        try:
            return await body(JobBook(store, run_log_size=settings.scheduler.run_log_size))
        except StoreUnavailable as exc:
            print(f"chatgate cron: the store is unreachable: {exc}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            await store.close()

    return asyncio.run(run())
