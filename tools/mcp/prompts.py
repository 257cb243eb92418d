"""MCP prompts as slash commands: only those listed in `mcp.servers.<name>.prompt_commands`.

`/summarize quarterly report` fetches the prompt from its server (the text after the command
fills its one argument; `key=value` pairs fill several) and runs the prompt's messages as the
person's next message to the agent.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Awaitable, Callable

from mcp.types import EmbeddedResource, GetPromptResult, Prompt, TextContent

from gateway.sdk import Command, CommandCall, Extensions, Inbound, Submission
from tools.mcp.connection import ServerConnection
from tools.mcp.manager import MCPManager
from tools.mcp.results import resource_text

log = logging.getLogger(__name__)

_NAME = re.compile(r"[^a-z0-9_]+")
Submit = Callable[[Inbound], Awaitable[Submission]]


def add_prompt_commands(extensions: Extensions, manager: MCPManager, submit: Submit) -> list[str]:
    """Add a command for every prompt named in `prompt_commands`; returns the command names.
    A name an existing command already has is skipped (the existing one wins)."""
    added = []
    for status in manager.statuses():
        conn = manager.connection(status.name)
        if conn is None:
            continue
        for prompt in conn.cfg.prompt_commands:
            name = _NAME.sub("_", prompt.lower()).strip("_")[:32]
            if not name or extensions.command(name) is not None:
                log.warning("mcp prompt command skipped server=%s prompt=%s", conn.name, prompt)
                continue
            help_ = f"run the prompt {prompt} of the MCP server {conn.name}"
            extensions.add_command(Command(name, help_, prompt_command(conn, prompt, submit)))
            added.append(name)
    return added


def prompt_command(
    conn: ServerConnection, prompt: str, submit: Submit
) -> Callable[[CommandCall], Awaitable[str | None]]:
    async def handler(call: CommandCall) -> str | None:
        try:
            listed = {p.name: p for p in await conn.list_prompts()}
        except Exception as exc:  # not connected, or the server refused: one line to the person
            return f"The prompt {prompt} is unavailable: {_first_line(exc)}"
        found = listed.get(prompt)
        if found is None:
            return f"The MCP server {conn.name} no longer offers the prompt {prompt}."
        arguments, problem = prompt_arguments(found, call.args)
        if problem:
            return problem
        try:
            result = await conn.get_prompt(prompt, arguments)
        except Exception as exc:
            return f"The prompt {prompt} failed: {_first_line(exc)}"
        text = prompt_text(result)
        if not text:
            return f"The prompt {prompt} came back empty."
        if text.startswith("/"):  # it must reach the model, not the command parser again
            text = f"[prompt {prompt} of {conn.name}]\n{text}"
        # The prompt becomes the person's message, as if they had typed it.
        event = f"{call.inbound.event_id}:prompt"
        await submit(call.inbound.model_copy(update={"text": text, "event_id": event}))
        return None

    return handler


def prompt_arguments(prompt: Prompt, given: str) -> tuple[dict[str, str], str]:
    """The prompt's arguments from the command's text, or a usage line explaining them."""
    declared = prompt.arguments or []
    required = [a.name for a in declared if a.required]
    usage = "Usage: /" + " ".join(
        [prompt.name, *(f"{a.name}=…" if a.required else f"[{a.name}=…]" for a in declared)]
    )
    try:
        words = shlex.split(given)
    except ValueError:
        return {}, usage
    pairs = [w.partition("=") for w in words]
    if words and all(sep and key for key, sep, _ in pairs):
        arguments = {key: value for key, _, value in pairs}
    elif given.strip() and len(declared) == 1:
        arguments = {declared[0].name: given.strip()}
    elif given.strip():
        return {}, usage
    else:
        arguments = {}
    unknown = set(arguments) - {a.name for a in declared}
    missing = [name for name in required if not arguments.get(name)]
    if unknown or missing:
        return {}, usage
    return arguments, ""


def prompt_text(result: GetPromptResult) -> str:
    parts = []
    for message in result.messages:
        block = message.content
        if isinstance(block, TextContent):
            text = block.text
        elif isinstance(block, EmbeddedResource):
            text = resource_text(block.resource)[0]
        else:
            text = f"[{block.type}]"
        parts.append(text if message.role == "user" else f"(assistant) {text}")
    return "\n\n".join(p for p in parts if p.strip())


def _first_line(exc: Exception) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0]
