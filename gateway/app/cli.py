"""The `chatgate` command: run | chat | ask | doctor | config | dead-letters, and more.

Exit codes: 0 success, 1 the request failed (LLM unreachable, ...), 2 invalid
configuration or usage, 3 (`ask`) a decision is needed and there is no terminal to ask.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.runtime.event_loop import EventLoopChoice
    from gateway.runtime.logs import RedactingFilter

# Only argparse is loaded before the arguments are read: `chatgate --help` and a usage error
# answer without importing pydantic, the platforms or the store. Each command imports what it
# runs.

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


def no_platform_message() -> str:
    from adapters.registry import plugins

    ways = ", ".join(p.how_to_enable for p in plugins() if p.runs_in_gateway)
    return (
        "No chat platform is configured, so there is nothing to run.\n"
        f"Set one of: {ways}\n"
        "(or the same keys in chatgate.toml), or try the agent in this terminal: chatgate chat"
    )


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_CONFIG
    # Every subcommand's parser (~150 KB of objects) would stay for the life of `chatgate run`.
    del parser
    from gateway.config import ConfigError
    from gateway.sdk.platforms import PlatformUnavailable
    from gateway.store.base import StoreUnavailable

    try:
        settings = _load_settings(args)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config error: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    func: Callable[[Settings, argparse.Namespace], int] = args.func
    if args.command in ("run", "chat", "ask"):
        from gateway.llm.firstrun import no_model_message

        missing = no_model_message(settings)
        if missing is not None:
            print(missing, file=sys.stderr)
            return EXIT_CONFIG
    try:
        return func(settings, args)
    except ConfigError as exc:  # found while building (tool policy names, timezones, ...)
        for problem in exc.problems:
            print(f"config error: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    except PlatformUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except StoreUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _load_settings(args: argparse.Namespace) -> Settings:
    from adapters.registry import settings_sections
    from gateway.config import ConfigError, load_settings, named_sections

    if args.command != "run":  # `config show`, `doctor`, ... see every section
        return load_settings(args.config, sections=settings_sections(), **_overrides(args))
    # The gateway builds the sections of the platforms the config or the environment name;
    # another platform's section would hold only its defaults, which start nothing, while
    # its settings model took memory for the life of the process (~0.15 MB each).
    try:
        named = settings_sections(named_sections(args.config))
        return load_settings(args.config, sections=named, **_overrides(args))
    except ConfigError:
        # Said as with every section: a misspelt name is matched against all of them.
        return load_settings(args.config, sections=settings_sections(), **_overrides(args))


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    # Terminal commands must not open the HTTP port a running gateway may hold.
    if args.command == "ask":  # nor run scheduled jobs in a one-shot process
        return {
            "http": {"enabled": False},
            "scheduler": {"enabled": False},
            "console": {"chat_id": args.chat, "echo": False},
        }
    if args.command == "chat":
        return {"http": {"enabled": False}, "console": {"chat_id": args.chat}}
    return {}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chatgate", description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="path to chatgate.toml (default: $CHATGATE_CONFIG)")
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser("run", help="run the gateway: HTTP server and every configured platform")
    run.set_defaults(func=cmd_run)

    chat = sub.add_parser("chat", help="talk to the agent in this terminal")
    chat.add_argument("--chat", default="local", help="conversation id (default: local)")
    chat.set_defaults(func=cmd_chat)

    ask = sub.add_parser("ask", help="one turn: send TEXT, print the answer")
    ask.add_argument("text")
    ask.add_argument("--chat", default="local", help="conversation id (default: local)")
    ask.set_defaults(func=cmd_ask)

    doctor = sub.add_parser("doctor", help="check config, store, LLM and platform tokens")
    doctor.set_defaults(func=cmd_doctor)

    config = sub.add_parser("config", help="show or check the configuration")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    config_sub.add_parser("show", help="print the effective config, secrets masked").set_defaults(
        func=cmd_config_show
    )
    config_sub.add_parser("check", help="validate the config").set_defaults(func=cmd_config_check)

    # Lazy: the gateway package never imports tools at import time.
    from gateway.app.tools_cli import register as register_tools
    from tools.mcp.cli import register as register_mcp
    from tools.skills.cli import register as register_skills

    register_tools(sub)
    register_skills(sub)
    register_mcp(sub)
    approvals = sub.add_parser("approvals", help="approval requests")
    approvals_sub = approvals.add_subparsers(dest="approvals_command", required=True)
    log_cmd = approvals_sub.add_parser("log", help="the audit log of decisions, newest last")
    log_cmd.add_argument("--limit", type=int, default=50)
    log_cmd.set_defaults(func=cmd_approvals_log)

    for register in EXTRA_COMMANDS:
        register(sub)
    return parser


# Features outside the core add their subcommands here (cron).
EXTRA_COMMANDS: list[Callable[[Any], None]] = []


def _register_cron(sub: Any) -> None:
    from gateway.scheduling.cli import register

    register(sub)


EXTRA_COMMANDS.append(_register_cron)


def _register_usage(sub: Any) -> None:
    from gateway.budgets.cli import register

    register(sub)


EXTRA_COMMANDS.append(_register_usage)


def _register_dead_letters(sub: Any) -> None:
    from gateway.sessions.dead_letters_cli import register

    register(sub)


EXTRA_COMMANDS.append(_register_dead_letters)


def _run(coro: Coroutine[Any, Any, int], loop: EventLoopChoice = "asyncio") -> int:
    from gateway.runtime.event_loop import event_loop_runner

    try:
        return event_loop_runner(loop)(coro)
    except KeyboardInterrupt:
        return EXIT_FAILED


# -- run -----------------------------------------------------------------------------------


def _harden() -> None:
    """Before anything else runs: commands the agent starts must not read this process's
    memory or /proc/<pid>/environ, where the tokens and keys are."""
    from tools.shell.terminal.privileges import make_non_dumpable

    make_non_dumpable()


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.runtime.logs import setup_logging

    _harden()
    redactor = setup_logging(settings)
    return _run(_serve(settings, redactor), settings.event_loop)


async def _serve(settings: Settings, redactor: RedactingFilter) -> int:
    import asyncio
    import contextlib
    import signal

    from gateway.app.app import App
    from gateway.runtime.collector import CrowdPause, settle_collector
    from gateway.sdk.platforms import PlatformUnavailable
    from gateway.store.base import StoreUnavailable

    # Building opens nothing, so the ways out before `start` have nothing to close.
    app = App(settings)
    try:
        started = app.add_configured_adapters()
    except PlatformUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if not started:
        print(no_platform_message(), file=sys.stderr)
        return EXIT_CONFIG
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stopping.set)
    try:
        await app.start()  # a start that fails has closed what it opened
    except StoreUnavailable:
        raise  # main says it in one line, as for every command
    except Exception as exc:  # a platform refused the token, a port is taken, ...
        print(f"chatgate: could not start: {redactor.redact(str(exc))}", file=sys.stderr)
        return EXIT_FAILED
    settle_collector()
    pause = CrowdPause()
    pause.follow(app.intake_load)
    try:
        await stopping.wait()
    finally:
        pause.release()
        await app.stop()
    return EXIT_OK


# -- chat and ask --------------------------------------------------------------------------


def cmd_chat(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.runtime.logs import setup_logging

    _harden()
    # Problems reach the person as replies; log lines would only clutter the conversation.
    setup_logging(settings.model_copy(update={"log_level": "ERROR"}))
    return _run(_chat(settings))


async def _chat(settings: Settings) -> int:
    import asyncio

    from gateway.app.app import App
    from gateway.app.terminal import TerminalLines

    app = App(settings)
    console = app.add_terminal_adapter()
    async with app:
        print(
            f"chatgate: talking to {settings.llm.model} at {settings.llm.base_url}. "
            "/help for commands, Ctrl-D to quit."
        )
        lines = TerminalLines(asyncio.get_running_loop())
        # Lines are read while a turn runs, so that `/approve ID` answers the prompt it shows.
        running: set[asyncio.Future[Any]] = set()
        typed: asyncio.Future[str | None] | None = None
        while True:
            if typed is None:
                if not running:
                    print("you> ", end="", flush=True)
                typed = asyncio.ensure_future(lines.get())
            was_running = bool(running)
            await asyncio.wait({typed, *running}, return_when=asyncio.FIRST_COMPLETED)
            running = {turn for turn in running if not turn.done()}
            if not typed.done():
                if was_running and not running:
                    print("you> ", end="", flush=True)
                continue
            line, typed = typed.result(), None
            if line is None:
                print()
                break
            if line.strip():
                submission = await app.admission.submit(console.inbound(line))
                running.add(submission.done)
        if running:
            await asyncio.wait(running)
    return EXIT_OK


def cmd_ask(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.runtime.logs import setup_logging

    _harden()
    setup_logging(settings.model_copy(update={"log_level": "ERROR"}))
    return _run(_ask(settings, args.text))


async def _ask(settings: Settings, text: str) -> int:
    import asyncio
    import os

    from gateway.app.app import App
    from gateway.app.terminal import EXIT_WAITING, TerminalLines, TerminalTurn

    app = App(settings)
    console = app.add_terminal_adapter()
    follow = TerminalTurn(app, console, sys.stderr)
    # A question (an approval) is answered at the terminal; with none, it cannot be answered.
    lines = TerminalLines(asyncio.get_running_loop()) if os.isatty(0) else None
    async with app:
        submission = await app.admission.submit(console.inbound(text))
        outcome = await follow.ask(submission.done, lines)
        if isinstance(outcome, str):
            print(outcome, file=sys.stderr)
            if submission.session is not None:  # the request is closed, its command never runs
                await app.queue.stop_session(submission.session)
            return EXIT_WAITING
    if outcome.error:
        print(f"chatgate: {outcome.error}", file=sys.stderr)
        return EXIT_FAILED
    for out in console.sent:
        if id(out) not in follow.shown:
            print(out.text)
    return EXIT_OK


# -- doctor and config ---------------------------------------------------------------------


def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.app.app import platform_checks
    from gateway.app.doctor import run_checks
    from gateway.runtime.logs import setup_logging
    from tools.mcp.install import doctor_checks as mcp_doctor_checks
    from tools.shell.terminal.doctor import terminal_checks
    from tools.web.browser import doctor_check as browser_check

    setup_logging(settings.model_copy(update={"log_level": "CRITICAL"}))
    checks = [*platform_checks(settings), browser_check(settings)]
    results = _run_checks(run_checks(settings, checks, extra=[terminal_checks]))
    results += _run_checks(mcp_doctor_checks(settings))
    failed = False
    for check in results:
        print(f"{'pass' if check.ok else 'FAIL'}  {check.name}: {check.detail}")
        if not check.ok:
            failed = True
            if check.fix:
                print(f"      fix: {check.fix}")
    return EXIT_FAILED if failed else EXIT_OK


def _run_checks(coro: Coroutine[Any, Any, list[Any]]) -> list[Any]:
    import asyncio

    return asyncio.run(coro)


def cmd_approvals_log(settings: Settings, args: argparse.Namespace) -> int:
    import asyncio
    import json
    import time

    from gateway.approvals.service import AUDIT
    from gateway.store import open_store
    from gateway.store.base import StoreUnavailable

    async def read() -> list[str]:
        store = open_store(settings)
        try:
            return await store.list_range(AUDIT, -max(args.limit, 1), -1)
        finally:
            await store.close()

    try:
        entries = [json.loads(raw) for raw in asyncio.run(read())]
    except StoreUnavailable as exc:
        print(f"chatgate: cannot read the store: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not entries:
        print("no approval decisions yet")
        return EXIT_OK
    print(f"{'when (UTC)':19}  {'id':10}  {'outcome':8}  {'by':18}  {'requester':18}  command")
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e["ts"]))
        reason = f"  ({e['reason']})" if e.get("reason") else ""
        print(
            f"{when:19}  {e['id']:10}  {e['outcome']:8}  {e['by'] or '-':18}  "
            f"{e['requester']:18}  {e['command']}{reason}"
        )
    return EXIT_OK


def cmd_config_show(settings: Settings, args: argparse.Namespace) -> int:
    import json

    from gateway.config import masked

    print(json.dumps(masked(settings), indent=2, default=str))
    return EXIT_OK


def cmd_config_check(settings: Settings, args: argparse.Namespace) -> int:
    from gateway.app.tools_cli import offline_registry
    from gateway.config.data_dir import usable_data_dir

    usable_data_dir(settings)
    # Building the tools checks the policy's tool, group and profile names too.
    with offline_registry(settings):
        pass
    print("config ok")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
