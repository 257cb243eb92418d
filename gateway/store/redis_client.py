"""The store's commands on redis-py's asyncio client, sent in batches: what every caller asks in
one pass of the event loop goes to Redis as one pipeline, on one pooled connection.

redis-py checks a connection out of its pool and arms a timeout for every command it sends
alone; with hundreds of callers at once that bookkeeping, not Redis, bounded a burst. Batching
pays it once per pipeline instead (bench/burst.py and bench/telegram_throughput.py measure it;
the README has the figures). At most `batches` pipelines are in flight; what callers send
meanwhile waits for the next one, so a burst makes bigger batches, not more connections.

With `replicas` (Sentinel), each batch ends with WAIT, so its callers get their replies only
once that many replicas have the batch's writes: what a caller was told is stored survives a
failover (redis_replicas.py; on Redis Cluster the client does it, one WAIT per master).

Failures are redis-py's: a connection error is retried by its Retry (the whole pipeline, on a
new connection), then raised as redis.ConnectionError to every caller of the batch. With a
`deadline`, a pipeline (retries included) that has not finished by then fails with
redis.TimeoutError: one timer per pipeline, where redis-py's per-reply socket timeout armed
one per reply and cost a third of the CPU of a command. Error replies (redis.ResponseError,
NOSCRIPT as NoScriptError) are raised by `call` and kept in place in the results of `many`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store.redis_replicas import ReplicaAcks
from gateway.store.redis_topology import NETWORK_ERRORS

Command = Sequence[str | int | float | bytes]
ReplyError = ResponseError  # an error reply: WRONGTYPE, NOSCRIPT, an error a script raised...


def is_no_script(reply: Any) -> bool:
    """A reply saying the server lacks the script (it restarted, failed over, or SCRIPT FLUSH)."""
    return isinstance(reply, NoScriptError)


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script, run by its SHA1 (EVALSHA) and loaded when the server lacks it."""

    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())
        _EVERY_SCRIPT.append(self)

    def command(self, keys: Sequence[str], args: Sequence[Any]) -> list[Any]:
        return ["EVALSHA", self.sha, len(keys), *keys, *args]


_EVERY_SCRIPT: list[Script] = []  # every script made: loaded together (load_scripts)


async def load_scripts(wire: Wire) -> None:
    """Load every script the store runs, in one round trip, once the server lacks one.

    All at once, never only the one found missing: a batch that met a missing script runs
    it again with the reads that followed it, which is right only when every script in the
    batch was missing alike. Loaded one by one, a batch's later script (a lease release)
    could have run while an earlier one had not, and the re-read saw the release."""
    await wire.many([["SCRIPT", "LOAD", script.source] for script in _EVERY_SCRIPT])


class Wire(Protocol):
    """What the store's parts send commands through: RedisCommands (the tests also pass one
    over a fakeredis client, tests/fakeredis_wire.py)."""

    async def call(self, *command: str | int | float | bytes) -> Any: ...

    async def many(self, commands: Sequence[Command]) -> list[Any]: ...

    async def close(self) -> None: ...


_RESEND_PAUSE = 0.25  # Cluster: before sending again what lost its connection mid-reply
_RESENDS = 40  # at most this many times (the deadline bounds them too)
# Redis's error for a script that reached a key (named from a prefix, not declared) which a
# resharding has already moved off this node.
_MOVED_KEY = "non local key"


def _is_script_load(command: Command) -> bool:
    return [str(part).upper() for part in command[:2]] == ["SCRIPT", "LOAD"]


def _lost(reply: Any) -> bool:
    """A reply that says the command did not get through: the connection broke, or (Redis
    Cluster) its slot is moving to another master and a key the script reached is gone."""
    if isinstance(reply, NETWORK_ERRORS):
        return True
    return isinstance(reply, ResponseError) and _MOVED_KEY in str(reply)


class _Group:
    """The commands of one caller inside a batch, and where their replies go."""

    __slots__ = ("commands", "future")

    def __init__(self, commands: Sequence[Command], future: asyncio.Future[list[Any]]) -> None:
        self.commands = commands
        self.future = future


class RedisCommands:
    """`call` for one command, `many` for several in one round trip, over a redis-py client
    (single server, Sentinel-managed master or RedisCluster) whose replies are left unshaped.
    A RedisCluster pipeline sends each command to the node of its key's slot, one pipeline
    per node, and follows MOVED and ASK."""

    def __init__(
        self,
        client: Redis,
        *,
        batches: int = 4,
        replicas: int = 0,
        deadline: float | None = None,
    ) -> None:
        if batches < 1:
            raise ValueError(f"batches must be at least 1, got {batches}")
        self.client = client
        self._deadline = deadline
        self._batches = batches
        self._acks = ReplicaAcks(replicas)
        self._in_flight = 0
        self._waiting: list[_Group] = []
        self._flush_due = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._loading = asyncio.Lock()

    async def call(self, *command: str | int | float | bytes) -> Any:
        if _is_script_load(command):
            [sha] = await self._load([command])
            return sha
        [reply] = await self._queue([command])
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def many(self, commands: Sequence[Command]) -> list[Any]:
        """Replies in order, error replies in place (the commands go in one pipeline, which
        is not a transaction: a script is what runs several writes all or nothing)."""
        if not commands:
            return []
        if all(_is_script_load(command) for command in commands):
            return await self._load(commands)
        return await self._queue(commands)

    async def _load(self, commands: Sequence[Command]) -> list[Any]:
        """SCRIPT LOADs, not batched: on Redis Cluster each goes to every master (redis-py
        sends it so), where a pipeline could send it to one node only. One load at a time:
        after a failover every caller meets the missing scripts at once, and loads side by
        side would take more connections than a node's pool has."""
        async with self._loading, self._bounded():
            return [await self.client.script_load(str(command[2])) for command in commands]

    @contextlib.asynccontextmanager
    async def _bounded(self) -> AsyncIterator[None]:
        """The deadline of one pipeline, retries included; past it, redis-py drops the
        connection it was reading (the reply may still come) and callers get TimeoutError."""
        if self._deadline is None:
            yield
            return
        try:
            async with asyncio.timeout(self._deadline):
                yield
        except TimeoutError:
            raise RedisTimeoutError(f"no reply within {self._deadline:g} s") from None

    def _queue(self, commands: Sequence[Command]) -> asyncio.Future[list[Any]]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        self._waiting.append(_Group(commands, future))
        if not self._flush_due:
            # Everything asked in this pass of the loop goes in one pipeline.
            self._flush_due = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._flush_due = False
        if not self._waiting or self._in_flight >= self._batches:
            return  # a batch that ends sends what waits
        groups, self._waiting = self._waiting, []
        self._in_flight += 1
        task = asyncio.get_running_loop().create_task(self._send(groups))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, groups: list[_Group]) -> None:
        try:
            commands = [command for group in groups for command in group.commands]
            async with self._bounded():
                async with self.client.pipeline(transaction=False) as pipe:
                    for command in commands:
                        pipe.execute_command(*command)
                    waits = self._acks.due()
                    if waits:
                        # A master killed before a replica has its writes takes them along
                        # in a failover: a message acknowledged, or a reply marked sent,
                        # would be lost. WAIT holds the replies until a replica has what
                        # this batch wrote.
                        pipe.execute_command(*self._acks.wait_command())
                    replies: list[Any] = await pipe.execute(raise_on_error=False)
                if waits:
                    # No replica (it is down, or none was promoted yet): wait for none for
                    # a while rather than WAIT_MS on every batch.
                    self._acks.heard(replies.pop())
                await self._send_lost_again(commands, replies)
        except BaseException as exc:
            failure = exc if isinstance(exc, Exception) else RedisConnectionError("closed")
            for group in groups:
                if not group.future.done():
                    group.future.set_exception(failure)
            if not isinstance(exc, Exception):
                raise
        else:
            start = 0
            for group in groups:
                end = start + len(group.commands)
                if not group.future.done():  # its caller may have given up (cancelled)
                    group.future.set_result(replies[start:end])
                start = end
        finally:
            self._in_flight -= 1
            if self._waiting and not self._flush_due:
                self._flush_due = True
                asyncio.get_running_loop().call_soon(self._flush)

    async def _send_lost_again(self, commands: list[Command], replies: list[Any]) -> None:
        """A RedisCluster pipeline whose node's connection broke while its replies were read
        leaves the network error in place of each reply (a failover under way). Those
        commands go again, after a pause, as redis-py does with a pipeline that could not be
        sent: the next attempt reads the slot map again once a node refuses it. A script
        that reached a key of its slot already moved to another master (resharding) goes
        again too. Like every retry here, a command that ran before its reply was lost (or a
        script up to the moved key) runs twice: the store's writes are made so that a second
        run changes nothing (fenced scripts; counters and list appends with ids)."""
        for _ in range(_RESENDS):
            lost = [n for n, reply in enumerate(replies) if _lost(reply)]
            if not lost:
                return
            await asyncio.sleep(_RESEND_PAUSE)
            async with self.client.pipeline(transaction=False) as pipe:
                for n in lost:
                    pipe.execute_command(*commands[n])
                again: list[Any] = await pipe.execute(raise_on_error=False)
            for n, reply in zip(lost, again, strict=True):
                replies[n] = reply

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.client.aclose()
