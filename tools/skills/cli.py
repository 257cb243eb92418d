"""`chatgate skills list | show NAME | install PATH_OR_GIT_URL | remove NAME`: the parser.

Every `chatgate` call builds the parser, so this module imports nothing heavy; the command
runs from tools/skills/commands.py, imported when it is chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _command(name: str) -> Callable[[Any, Any], int]:
    def run(settings: Any, args: Any) -> int:
        from tools.skills import commands

        command: Callable[[Any, Any], int] = getattr(commands, name)
        return command(settings, args)

    return run


def register(subparsers: Any) -> None:
    skills = subparsers.add_parser("skills", help="bundled, local and shared skills")
    sub = skills.add_subparsers(dest="skills_command", required=True)
    sub.add_parser("list", help="every skill, and folders that are not valid skills").set_defaults(
        func=_command("_cmd_list")
    )
    show = sub.add_parser("show", help="a skill's full instructions and files")
    show.add_argument("name")
    show.set_defaults(func=_command("_cmd_show"))
    install = sub.add_parser(
        "install", help="add (or replace) a shared skill from a folder or a git repository"
    )
    install.add_argument(
        "source", help="a folder with a SKILL.md (or folders of them), or a git URL"
    )
    install.set_defaults(func=_command("_cmd_install"))
    remove = sub.add_parser("remove", help="delete a shared skill")
    remove.add_argument("name")
    remove.set_defaults(func=_command("_cmd_remove"))
