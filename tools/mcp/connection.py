"""One MCP server, kept connected in the background: start, list tools, follow list changes,
notice a crash, reconnect with backoff, stop.

A supervisor task owns the SDK client (its anyio task groups must be entered and left in one
task); tool calls from turns use the client while it is connected and get a `ToolError` when it
is not. Nothing here ever blocks the gateway: connecting happens in that task only.
"""

from __future__ import annotations

import asyncio
import enum
import fnmatch
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    GetPromptResult,
    Prompt,
    ReadResourceResult,
    Resource,
    Tool,
    ToolListChangedNotification,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from gateway.sdk import MCPServerSettings, ToolError
from tools.mcp.transport import Mode, StderrTail, open_client, transport_kind

log = logging.getLogger(__name__)

_MAX_PAGES = 100
_STOP_TIMEOUT = 15.0  # stdio shutdown: close stdin, 2 s, SIGTERM, 2 s, SIGKILL


class State(enum.StrEnum):
    STARTING = "starting"
    CONNECTED = "connected"
    FAILED = "failed"  # waiting to retry
    STOPPED = "stopped"


@dataclass(frozen=True)
class ServerStatus:
    name: str
    transport: str  # stdio | http | sse
    state: State
    reason: str  # why it failed (empty otherwise)
    tools: tuple[Tool, ...]  # after include_tools / exclude_tools
    protocol: str  # the negotiated protocol version, when connected
    since: float  # time.time() of the last state change


class _Lost(Exception):
    """The connection ended while the server was connected."""


class ServerConnection:
    def __init__(
        self,
        name: str,
        cfg: MCPServerSettings,
        *,
        reconnect_min: float = 1.0,
        reconnect_max: float = 60.0,
        on_change: Callable[[str], None] = lambda _name: None,
        mode: Mode = "auto",
    ) -> None:
        self.name = name
        self.cfg = cfg
        self._reconnect = (reconnect_min, max(reconnect_min, reconnect_max))
        self._on_change = on_change
        self._mode = mode
        self._state = State.STOPPED
        self._reason = ""
        self._last_failure = ""
        self._since = time.time()
        self._tools: tuple[Tool, ...] = ()
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._wake = asyncio.Event()  # a change wants the supervisor's attention
        self._refresh = False
        self._lost = ""
        self._settled = asyncio.Event()  # the first attempt has ended, either way
        self._stderr: StderrTail | None = None
        self._http_error = 0  # the last HTTP error status of this session, for the reason
        self._was_connected = False  # this attempt got as far as listing the tools
        self._retry = True

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, *, retry: bool = True) -> None:
        """Connect in the background; without `retry` a failed server stays failed (for
        one-shot commands that report the first outcome)."""
        if self._task is None:
            self._retry = retry
            self._settled = asyncio.Event()
            self._set(State.STARTING)
            self._task = asyncio.create_task(self._supervise(), name=f"mcp server {self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if self._scope is not None:
            self._scope.cancel()  # a cancel scope, not task.cancel(): stdio shutdown is shielded
        try:
            await asyncio.wait_for(task, _STOP_TIMEOUT)
        except TimeoutError:
            log.error("mcp server did not stop in time server=%s", self.name)
        except Exception:
            log.exception("mcp server stop failed server=%s", self.name)
        self._client = None
        self._tools = ()
        self._set(State.STOPPED)

    async def wait_settled(self) -> None:
        """Until the first connection attempt has succeeded or failed."""
        await self._settled.wait()

    def status(self) -> ServerStatus:
        return ServerStatus(
            name=self.name,
            transport=transport_kind(self.cfg),
            state=self._state,
            reason=self._reason
            or (f"retrying; last failure: {self._last_failure}" if self._last_failure else ""),
            tools=self._tools,
            protocol=self._client.protocol_version if self._client is not None else "",
            since=self._since,
        )

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self._tools if self._state is State.CONNECTED else ()

    # -- requests --------------------------------------------------------------------------

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call a tool; every failure becomes a ToolError the model can act on."""
        timeout = self.cfg.timeout_seconds
        client = self._connected()
        try:
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise ToolError(
                    f"the MCP server '{self.name}' did not answer {tool} within {timeout:g} s; "
                    "the call was cancelled. Try again later or with less work."
                ) from None
            if exc.code == CONNECTION_CLOSED:
                self._connection_lost("the connection closed during a call")
                raise ToolError(
                    f"the MCP server '{self.name}' closed the connection during {tool} (it may "
                    "have crashed), so the call may or may not have taken effect. The gateway "
                    "is reconnecting; check before repeating it."
                ) from None
            raise ToolError(
                f"the MCP server '{self.name}' refused {tool}: {exc.message} (code {exc.code})"
            ) from None
        except ValidationError:
            raise ToolError(
                f"the MCP server '{self.name}' sent a malformed result for {tool}."
            ) from None
        except RuntimeError:  # the client closed between the check above and the call
            raise ToolError(
                f"the MCP server '{self.name}' disconnected before {tool} was sent; the gateway "
                "is reconnecting. Try again in a moment."
            ) from None
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            self._connection_lost(f"{type(exc).__name__}: {exc}")
            raise ToolError(
                f"the MCP server '{self.name}' could not be reached for {tool} "
                f"({type(exc).__name__}); the gateway is reconnecting. Try again later."
            ) from None

    async def list_resources(self) -> list[Resource]:
        client = self._connected()
        return await _all_pages(lambda cursor: client.list_resources(cursor=cursor), "resources")

    async def read_resource(self, uri: str) -> ReadResourceResult:
        return await self._connected().read_resource(uri)

    async def list_prompts(self) -> list[Prompt]:
        client = self._connected()
        return await _all_pages(lambda cursor: client.list_prompts(cursor=cursor), "prompts")

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> GetPromptResult:
        return await self._connected().get_prompt(name, arguments)

    def _connected(self) -> Client:
        client = self._client
        if client is None or self._state is not State.CONNECTED:
            why = f": {self._reason}" if self._reason else ""
            raise ToolError(
                f"the MCP server '{self.name}' is not connected ({self._state}{why}); its tools "
                "are unavailable until it reconnects. Tell the user, or try again later."
            )
        return client

    # -- the supervisor --------------------------------------------------------------------

    async def _supervise(self) -> None:
        delay = self._reconnect[0]
        with anyio.CancelScope() as scope:
            self._scope = scope
            while True:
                self._set(State.STARTING)
                reason = "the connection ended"
                self._was_connected = False
                try:
                    await self._session()
                except Exception as exc:
                    reason = self._describe(exc)
                if self._was_connected:
                    delay = self._reconnect[0]  # it worked before: try again soon
                self._client = None
                self._tools = ()
                # A server that keeps failing the same way is logged loudly once.
                level = logging.INFO if reason == self._last_failure else logging.WARNING
                self._last_failure = reason
                self._set(State.FAILED, reason)
                self._settled.set()
                wait = delay if self._retry else math.inf
                log.log(
                    level,
                    "mcp server unavailable server=%s reason=%s retry_in=%.1fs",
                    self.name,
                    reason,
                    wait,
                )
                await anyio.sleep(wait)
                delay = min(delay * 2, self._reconnect[1])

    async def _session(self) -> None:
        """Connect and serve until the connection is lost; always ends by raising."""
        stderr = self._stderr = StderrTail(self.name)
        self._http_error = 0
        self._lost, self._refresh = "", False
        self._wake.clear()
        try:
            # One scope for the whole session (anyio needs strict nesting); its deadline is the
            # startup timeout until the tools are listed, then lifted.
            with anyio.CancelScope(
                deadline=anyio.current_time() + self.cfg.startup_timeout_seconds
            ) as startup:
                async with open_client(
                    self.name,
                    self.cfg,
                    message_handler=self._on_message,
                    on_stream_end=lambda: self._connection_lost("the server ended the connection"),
                    stderr=stderr,
                    on_http_error=self._note_http_error,
                    mode=self._mode,
                ) as client:
                    tools = await self._list_tools(client)
                    startup.deadline = math.inf
                    self._client, self._tools = client, tools
                    self._last_failure, self._http_error = "", 0
                    self._was_connected = True
                    self._set(State.CONNECTED)
                    self._settled.set()
                    log.info(
                        "mcp server connected server=%s transport=%s protocol=%s tools=%d",
                        self.name,
                        transport_kind(self.cfg),
                        client.protocol_version,
                        len(tools),
                    )
                    async with anyio.create_task_group() as tasks:
                        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                            tasks.start_soon(self._listen, client)
                        await self._serve(client)
            if startup.cancelled_caught:
                raise TimeoutError(
                    f"no answer within {self.cfg.startup_timeout_seconds:g} s "
                    "(startup_timeout_seconds)"
                )
            raise _Lost("the connection ended")
        finally:
            with anyio.CancelScope(shield=True):  # bounded: at most a second
                await stderr.close()

    async def _serve(self, client: Client) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._lost:
                # Its tools go at once, not after the transport has wound down.
                self._set(State.FAILED, self._lost)
                raise _Lost(self._lost)
            if self._refresh:
                self._refresh = False
                with anyio.fail_after(self.cfg.startup_timeout_seconds):
                    tools = await self._list_tools(client)
                added = {t.name for t in tools} - {t.name for t in self._tools}
                self._tools = tools
                log.info(
                    "mcp tools changed server=%s tools=%d added=%s",
                    self.name,
                    len(tools),
                    ",".join(sorted(added)) or "-",
                )
                self._on_change(self.name)

    async def _listen(self, client: Client) -> None:
        """2026-07-28 servers announce list changes only on a subscriptions/listen stream."""
        while True:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    async for _event in subscription:
                        self._request_refresh()
            except SubscriptionLost:
                self._connection_lost("the server dropped the change stream")
                return
            except (ListenNotSupportedError, MCPError) as exc:
                log.info("mcp server offers no change stream server=%s (%s)", self.name, exc)
                return
            await anyio.sleep(1.0)  # closed gracefully: listen again

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._request_refresh()
        elif isinstance(message, Exception):
            log.debug("mcp transport error server=%s error=%s", self.name, message)

    def _note_http_error(self, status: int) -> None:
        self._http_error = status

    def _request_refresh(self) -> None:
        self._refresh = True
        self._wake.set()

    def _connection_lost(self, why: str) -> None:
        if self._state is State.CONNECTED and not self._lost:
            self._lost = why
            self._wake.set()

    async def _list_tools(self, client: Client) -> tuple[Tool, ...]:
        tools: list[Tool] = await _all_pages(
            lambda cursor: client.list_tools(cursor=cursor), "tools"
        )
        return tuple(t for t in tools if self._wanted(t.name))

    def _wanted(self, tool: str) -> bool:
        include, exclude = self.cfg.include_tools, self.cfg.exclude_tools
        if include and not any(fnmatch.fnmatchcase(tool, p) for p in include):
            return False
        return not any(fnmatch.fnmatchcase(tool, p) for p in exclude)

    def _describe(self, exc: BaseException) -> str:
        """One line for logs, `mcp list` and doctor, with the server's last stderr line."""
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if isinstance(exc, FileNotFoundError):
            text = f"command not found: {self.cfg.command}"
        elif isinstance(exc, _Lost | TimeoutError):
            text = str(exc) or "the server did not answer in time"
        elif isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
            text = "the server closed the connection"
        elif self._http_error:
            text = f"the server answered HTTP {self._http_error}"
            if self._http_error in (401, 403):
                text += " (check the server's headers, e.g. Authorization)"
        elif isinstance(exc, MCPError):
            text = f"protocol error: {exc.message} (code {exc.code})"
        else:
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        last = self._stderr.last() if self._stderr is not None else ""
        if last:
            text += f" (stderr: {last})"
        return self._redact(text)

    def _redact(self, text: str) -> str:
        secrets = [
            v.get_secret_value() for v in (*self.cfg.env.values(), *self.cfg.headers.values())
        ]
        for secret in sorted(secrets, key=len, reverse=True):
            if len(secret) >= 4:
                text = text.replace(secret, "***")
        return text

    def _set(self, state: State, reason: str = "") -> None:
        changed = state is not self._state
        self._state, self._reason = state, reason
        if changed:
            self._since = time.time()
            self._on_change(self.name)


async def _all_pages(fetch: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paginated listing (at most `_MAX_PAGES` pages, so a server whose
    pagination never ends cannot hang it)."""
    out: list[Any] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await fetch(cursor)
        out.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            break
    return out
