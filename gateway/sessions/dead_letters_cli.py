"""`chatgate dead-letters list | retry ID | drop ID`: the messages set aside after failing every
attempt (gateway/sessions/dead_letters.py). On Redis it works beside running replicas, which pick a
retried message up within a second; the embedded store serves one process, so stop the
gateway first (a retried message then runs when it starts)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.config import Settings

# Only the parser is built at import (every `chatgate` call builds it); the command imports
# the store when it runs.

EXIT_OK, EXIT_FAILED = 0, 1
SHOWN_CHARS = 60


def register(subparsers: Any) -> None:
    """Add `dead-letters` to the `chatgate` argument parser (gateway.app.cli.EXTRA_COMMANDS)."""
    dead = subparsers.add_parser(
        "dead-letters", help="messages set aside after failing every attempt: list, retry, drop"
    )
    dead_sub = dead.add_subparsers(dest="dead_letters_command", required=True)
    dead_sub.add_parser("list", help="every dead letter, oldest first").set_defaults(
        func=cmd_dead_letters
    )
    for name, what in (("retry", "put it back in its chat's queue"), ("drop", "forget it")):
        cmd = dead_sub.add_parser(name, help=f"{what}")
        cmd.add_argument("id", help="the id `chatgate dead-letters list` shows")
        cmd.set_defaults(func=cmd_dead_letters)


def cmd_dead_letters(settings: Settings, args: argparse.Namespace) -> int:
    import asyncio

    return asyncio.run(_dead_letters(settings, args.dead_letters_command, getattr(args, "id", "")))


async def _dead_letters(settings: Settings, command: str, letter_id: str) -> int:
    from gateway.sessions.dead_letters import DeadLetters
    from gateway.store import StoreLocked, StoreUnavailable, open_store

    try:
        store = open_store(settings)
    except StoreLocked as exc:
        print(
            f"chatgate dead-letters: {exc}. Stop the running gateway to change the embedded "
            "store; the console shows dead letters meanwhile.",
            file=sys.stderr,
        )
        return EXIT_FAILED
    letters = DeadLetters(store)
    try:
        if command == "list":
            return _print(await letters.list())
        if command == "retry":
            problem = await letters.retry(letter_id)
            if problem is not None:
                print(f"chatgate dead-letters: {problem}", file=sys.stderr)
                return EXIT_FAILED
            print(f"{letter_id} is back in its chat's queue")
            return EXIT_OK
        if not await letters.drop(letter_id):
            print(f"chatgate dead-letters: no dead letter {letter_id!r}", file=sys.stderr)
            return EXIT_FAILED
        print(f"{letter_id} dropped")
        return EXIT_OK
    except StoreUnavailable as exc:
        print(f"chatgate dead-letters: cannot reach the store: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        await store.close()


def _print(letters: list[Any]) -> int:
    if not letters:
        print("no dead letters")
        return EXIT_OK
    print(f"{'set aside (UTC)':19}  {'id':34}  {'session':24}  tries  reason / message")
    for letter in letters:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(letter.at))
        text = letter.text().replace("\n", " ")[:SHOWN_CHARS]
        print(
            f"{when:19}  {letter.id:34}  {letter.session:24}  {letter.attempts:5}  "
            f"{letter.reason} / {text!r}"
        )
    return EXIT_OK
