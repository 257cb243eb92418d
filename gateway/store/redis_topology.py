"""Where the Redis store connects: one server (`redis.url`), a master found through Sentinel
(`redis.sentinels` + `redis.sentinel_master`) or a Redis Cluster (`redis.cluster_nodes`); and
the redis-py client for each."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import unquote, urlsplit

from redis.asyncio import BlockingConnectionPool, Redis, Sentinel
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import Connection, SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError
from redis.backoff import ExponentialWithJitterBackoff
from redis.connection import HiredisRespSerializer
from redis.credentials import CredentialProvider
from redis.exceptions import (
    ClusterError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.utils import HIREDIS_AVAILABLE

from gateway.store.redis_protocol import NamesWrongProtocol, WrongProtocol, wrong_protocol
from gateway.store.redis_refusals import Refused, TlsFault, refused, tls_refusal, why_unreachable
from gateway.store.redis_replicas import wait_on_every_master

# What a failover looks like to a caller: the connection broke or timed out, or (Cluster) the
# cluster said it is down, or to try again while a slot moves (redis-py gives up on that with
# ClusterError "TTL exhausted"), or its slot map lacks the slot for now. None of these ran.
NETWORK_ERRORS = (
    RedisConnectionError,
    RedisTimeoutError,
    ClusterError,  # ClusterDownError among them
    TryAgainError,
    SlotNotCoveredError,
)

Mode = Literal["single", "sentinel", "cluster"]
# A sentinel that has not answered within this long is asked alongside the next one (a healthy
# one answers in milliseconds; a silent one would hold the lookup for its connect timeout).
HEDGE_SECONDS = 0.25
_T = TypeVar("_T")
# Commands the store sends, pipelines included, whose replies the cluster client must not
# shape: the store parses RESP2 as Redis sends it. The client's own (CLUSTER SLOTS, COMMAND) stay.
_CLUSTER_KEEPS_CALLBACKS = ("CLUSTER", "COMMAND")


def host_port(address: str, default_port: int) -> tuple[str, int]:
    """ "host:port" (or "[v6]:port", or a bare host) as a pair."""
    parts = urlsplit(f"//{address}")
    if not parts.hostname:
        raise ValueError(f"{address!r} is not host:port")
    return parts.hostname, parts.port or default_port


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """One server, a master behind Sentinel, or a Redis Cluster. With Sentinel or Cluster
    `url` is unused; the username, password and TLS settings apply to the data nodes (and to
    the sentinels too, unless `sentinel_password` is given: then the sentinels are asked as
    `sentinel_username`, or as their default user). TLS applies to every connection."""

    url: str = ""
    sentinels: tuple[str, ...] = ()
    cluster_nodes: tuple[str, ...] = ()  # any of the cluster's nodes: the rest is discovered
    sentinel_master: str = ""
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    db: int = 0
    tls: bool = False
    tls_ca_certs: str | None = None
    tls_certfile: str | None = None  # the client's own certificate, for servers that ask
    tls_keyfile: str | None = None
    # Makes the provider of a token for each new data connection (redis_credentials.py),
    # in place of username and password.
    credentials: Callable[[], CredentialProvider] | None = None

    def auth(self) -> dict[str, Any]:
        """The keyword arguments a redis-py client logs in to the data nodes with."""
        if self.credentials is not None:
            return {"credential_provider": self.credentials()}
        found: dict[str, Any] = {}
        if self.username:
            found["username"] = self.username
        if self.password:
            found["password"] = self.password
        return found

    @property
    def mode(self) -> Mode:
        if self.cluster_nodes:
            return "cluster"
        if self.sentinels:
            return "sentinel"
        return "single"

    @property
    def where(self) -> str:
        """The address without user or password, for messages and logs."""
        if self.mode == "sentinel":
            return f"sentinel master {self.sentinel_master} via " + ",".join(self.sentinels)
        if self.mode == "cluster":
            return "cluster via " + ",".join(self.cluster_nodes)
        parts = urlsplit(self.url)
        if parts.scheme == "unix":
            return f"unix://{parts.path}"
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"

    def sentinel_login(self) -> dict[str, Any]:
        """What the sentinels are asked with: their own user when set, else the data nodes'."""
        if self.sentinel_password is not None:
            return {"username": self.sentinel_username, "password": self.sentinel_password}
        return self.auth()

    @property
    def ssl(self) -> dict[str, Any]:
        """redis-py's TLS options for every connection: sentinels and data nodes alike."""
        if not self.tls:
            return {}
        return {
            "ssl": True,
            "ssl_ca_certs": self.tls_ca_certs,
            "ssl_certfile": self.tls_certfile,
            "ssl_keyfile": self.tls_keyfile,
        }

    def login_settings(self, who: Refused) -> str:
        """The settings that hold the username and password `who` did not take."""
        if who == "sentinels" and self.sentinel_password is not None:
            return "redis.sentinel_username and redis.sentinel_password"
        if self.mode == "single":
            return "the user and password in redis.url"
        return "redis.username and redis.password"

    def tls_settings(self, fault: TlsFault) -> str:
        """The settings that hold what the TLS handshake failed on."""
        if fault == "server certificate":
            return "ssl_ca_certs in redis.url" if self.mode == "single" else "redis.tls_ca_certs"
        if self.mode == "single":
            return "ssl_certfile and ssl_keyfile in redis.url"
        return "redis.tls_certfile and redis.tls_keyfile"

    def protocol_settings(self, server_tls: bool) -> str:
        """What to change when the servers speak the other protocol than the settings."""
        if self.mode == "single":
            return "rediss:// in redis.url" if server_tls else "redis:// in redis.url"
        return "redis.tls = true" if server_tls else "redis.tls = false"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Passwords to mask in messages."""
        found = [self.password, self.sentinel_password, urlsplit(self.url).password]
        return tuple({s for p in found if p for s in (p, unquote(p))})


class _HiredisPacking:
    """Commands packed by hiredis (redis-py's own HiredisRespSerializer), as redis-py's
    synchronous client does; its asyncio connections pack in Python, which cost a burst more
    CPU than anything else on the command path."""

    _serializer = HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        packed: list[bytes] = self._serializer.pack(*args)
        return packed


class _FollowsSentinelMaster:
    """A Sentinel-managed connection that lost its server asks the sentinels for the master
    before it sends again. redis-py reconnects there to the address it had instead (its
    issue 3874): after a failover, to the dead master until the retries run out."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:  # type: ignore[attr-defined]
            await self.connect()  # type: ignore[attr-defined]
        await super().send_packed_command(command, check_health)  # type: ignore[misc]


class _Sentinel(Sentinel):
    """A Sentinel that does not wait for a silent sentinel before asking the next, and whose
    "no master found" keeps a failed TLS handshake as its cause when that is why no sentinel
    answered.

    redis-py asks the sentinels in turn, so a sentinel whose host is down (often the one beside
    the master that just failed) costs a whole connect timeout before the next is asked; and
    its message names each sentinel's error by its class only, so a wrong CA or a missing
    client certificate read as a network outage, retried through every backoff."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        for client in self.sentinels:  # a sentinel in the other protocol is named too
            pool = client.connection_pool
            pool.connection_class = _connection_class(pool.connection_class, sentinel=False)

    async def discover_master(self, service_name: str) -> Any:
        """The master's (ip, port) from the first sentinel to name one in good state; that
        sentinel goes first in the list, as redis-py keeps it.

        The first sentinel is asked alone; the next is asked too as soon as one fails or
        names no healthy master, or when none has answered within HEDGE_SECONDS."""
        sentinels = list(self.sentinels)  # another lookup may reorder the list meanwhile
        unasked = deque(range(len(sentinels)))
        asks: dict[asyncio.Future[Any], int] = {}
        pending: set[asyncio.Future[Any]] = set()
        errors: dict[int, Exception] = {}

        def ask_next() -> None:
            if unasked:
                number = unasked.popleft()
                ask = asyncio.ensure_future(sentinels[number].sentinel_masters())
                asks[ask] = number
                pending.add(ask)

        ask_next()
        try:
            while pending:
                done, _ = await asyncio.wait(
                    pending, timeout=HEDGE_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    ask_next()
                for ask in sorted(done, key=lambda ask: asks[ask]):
                    pending.discard(ask)
                    try:
                        masters: dict[str, Any] = ask.result()
                    except (RedisConnectionError, RedisTimeoutError) as exc:
                        errors[asks[ask]] = exc
                        ask_next()
                        continue
                    state = masters.get(service_name)
                    if state and self.check_master_state(state, service_name):
                        self._put_first(sentinels[asks[ask]])
                        ip = self._force_master_ip or state["ip"]
                        return ip, state["port"]
                    ask_next()
        finally:
            for ask in pending:
                ask.cancel()
            if pending:  # a cancelled command closes its connection; let that finish
                await asyncio.gather(*pending, return_exceptions=True)
        named = ", ".join(f"{sentinels[n]} - {errors[n]!r}" for n in sorted(errors))
        failure = MasterNotFoundError(
            f"No master found for {service_name!r}" + (f" : {named}" if named else "")
        )
        causes = (errors[n] for n in sorted(errors))
        raise failure from next((e for e in causes if tls_refusal(e) or wrong_protocol(e)), None)

    def _put_first(self, client: Any) -> None:
        at = self.sentinels.index(client)
        self.sentinels[0], self.sentinels[at] = self.sentinels[at], self.sentinels[0]


_CLASSES: dict[tuple[type[Any], bool], type[Any]] = {}


def _connection_class(base: type[Any], *, sentinel: bool) -> type[Any]:
    """`base` naming a server in the other protocol, with hiredis packing (and, under
    Sentinel, master lookup on reconnect)."""
    if (base, sentinel) not in _CLASSES:
        mixins: list[type[Any]] = [NamesWrongProtocol]
        if sentinel:
            mixins.append(_FollowsSentinelMaster)
        if HIREDIS_AVAILABLE:
            mixins.append(_HiredisPacking)
        _CLASSES[base, sentinel] = type(base.__name__, (*mixins, base), {})
    return _CLASSES[base, sentinel]


class _Retry(Retry):
    """Gives up at once on a refused login or certificate: a wrong password stays wrong, and
    retrying it would keep the caller waiting through every backoff before it hears so."""

    async def call_with_retry(
        self,
        do: Callable[[], Awaitable[_T]],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> _T:
        def retryable(error: Exception) -> bool:
            if refused(error):
                return False
            return is_retryable is None or is_retryable(error)

        return await super().call_with_retry(do, fail, retryable, with_failure_count)


def _retry(retries: int) -> Retry:
    # A command retried after a timeout may have run before its reply was lost: the store's
    # writes are idempotent, fenced scripts, or carry ids that make them count once
    # (redis_once.py).
    return _Retry(
        ExponentialWithJitterBackoff(cap=1.0, base=0.05),
        retries,
        supported_errors=(RedisConnectionError, RedisTimeoutError, ClusterError, TryAgainError),
    )


def open_client(
    target: RedisTarget,
    *,
    max_connections: int,
    socket_timeout: float,
    retries: int,
    health_check_interval: float = 0,
    raw_replies: bool = True,
    per_reply_timeout: bool = True,
    cluster_replicas: int = 0,
) -> Redis:
    """A redis-py client for `target`; it connects on first use. With `raw_replies`, replies
    come as Redis sends them (no redis-py shaping), as the store's parsing expects. Without
    `per_reply_timeout` a read waits as long as it takes: the caller bounds the whole call
    (RedisCommands does, once per pipeline instead of once per reply). With
    `cluster_replicas` (Cluster only), each master's part of a pipeline that writes ends with
    WAIT for that many of its replicas (redis_replicas.py)."""
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": socket_timeout if per_reply_timeout else None,
        "socket_connect_timeout": socket_timeout,
        "socket_keepalive": True,
        "health_check_interval": health_check_interval,
        "retry": _retry(retries),
    }
    if target.url.startswith("unix://"):
        del common["socket_keepalive"]  # TCP only
    if raw_replies:
        # The store reads replies in RESP2's shapes (HGETALL as a flat list).
        common["protocol"] = 2
    credentials = target.auth()
    tls = target.ssl
    client: Redis
    if target.mode == "cluster":
        # A RedisCluster speaks the same commands and pipelines: the store treats it alike.
        cluster = _open_cluster(target, max_connections, common, credentials, raw_replies)
        if cluster_replicas:
            wait_on_every_master(cluster, cluster_replicas)
        opened: Redis = cluster
        return opened
    if target.mode == "sentinel":
        sentinel = _Sentinel(
            [host_port(a, 26379) for a in target.sentinels],
            sentinel_kwargs={
                # One try per sentinel: redis-py asks the next one, and the data connection's
                # own retries (which ask the sentinels again) cover a failover.
                "retry": _retry(0),
                "socket_timeout": socket_timeout,
                "socket_connect_timeout": socket_timeout,
                "decode_responses": True,
                **target.sentinel_login(),
                **tls,
            },
        )
        client = sentinel.master_for(
            target.sentinel_master,
            db=target.db,
            max_connections=max_connections,
            **common,
            **credentials,
            **tls,
        )
    else:
        pool = BlockingConnectionPool.from_url(
            target.url,
            max_connections=max_connections,
            timeout=socket_timeout,
            **common,
            **credentials,
        )
        # As Redis.from_pool does, and with the provider: a streaming one (Entra ID) then
        # re-authenticates the pool's connections with each new token.
        client = Redis(
            connection_pool=pool, credential_provider=credentials.get("credential_provider")
        )
        client.auto_close_connection_pool = True
    if raw_replies:
        client.response_callbacks = {}
    connections = client.connection_pool
    connections.connection_class = _connection_class(
        connections.connection_class, sentinel=target.mode == "sentinel"
    )
    return client


class _Cluster(RedisCluster):
    """A RedisCluster whose first reading of the slot map, when no node answered, fails as
    the nodes did (a ConnectionError, an AuthenticationError), not as a RedisClusterException
    that callers would not take for a network error."""

    async def initialize(
        self,
        additional_startup_nodes_info: list[tuple[str, int]] | None = None,
        last_failed_node_name: str | None = None,
    ) -> RedisCluster:
        try:
            return await super().initialize(additional_startup_nodes_info, last_failed_node_name)
        except RedisClusterException as exc:
            cause = exc.__cause__
            if isinstance(cause, WrongProtocol):
                raise WrongProtocol(cause.address, server_tls=cause.server_tls) from exc
            if isinstance(cause, RedisConnectionError | RedisTimeoutError):
                raise type(cause)(str(cause) or str(exc)) from exc
            raise


def _open_cluster(
    target: RedisTarget,
    max_connections: int,
    common: dict[str, Any],
    credentials: dict[str, Any],
    raw_replies: bool,
) -> Any:
    """A RedisCluster client: it reads the slot map from any reachable node, follows MOVED and
    ASK, and after a connection error reads the map again (a failover), as often as `retry`
    allows. `max_connections` applies per node."""
    base = SSLConnection if target.tls else Connection
    tls = target.ssl
    client = _Cluster(
        startup_nodes=[ClusterNode(*host_port(a, 6379)) for a in target.cluster_nodes],
        max_connections=max_connections,
        **common,
        **credentials,
        **tls,
    )
    # Set after construction (RedisCluster swaps a connection class it is given for its own):
    # nodes found later take it from the shared keyword arguments, the startup nodes directly.
    packing = _connection_class(base, sentinel=False)
    client.connection_kwargs["connection_class"] = packing
    client.nodes_manager.connection_kwargs["connection_class"] = packing
    for node in client.startup_nodes:
        node.connection_class = packing
    if raw_replies:
        callbacks = client.response_callbacks  # shared with every node, present and future
        for command in [c for c in callbacks if not c.startswith(_CLUSTER_KEEPS_CALLBACKS)]:
            del callbacks[command]
    return client


async def _latency_ms(client: Redis) -> float:
    started = time.perf_counter()
    await client.ping()
    return (time.perf_counter() - started) * 1000


def _node_client(
    target: RedisTarget, host: str, port: int, wait: float, login: dict[str, Any] | None = None
) -> Redis:
    """A client of one node for a probe (`login`: other than the data nodes', a sentinel's)."""
    client = Redis(
        host=host,
        port=port,
        **(target.auth() if login is None else login),
        **target.ssl,
        socket_timeout=wait,
        socket_connect_timeout=wait,
        retry=_retry(0),  # a probe: what it meets is the answer
        decode_responses=True,
    )
    pool = client.connection_pool
    pool.connection_class = _connection_class(pool.connection_class, sentinel=False)
    return client


async def _node_line(target: RedisTarget, role: str, host: str, port: int, wait: float) -> str:
    client = _node_client(target, host, port, wait)
    try:
        return f"{role} {host}:{port} {await _latency_ms(client):.1f} ms"
    except NETWORK_ERRORS as exc:
        return f"{role} {host}:{port} unreachable ({why_unreachable(exc)})"
    finally:
        await client.aclose()


async def describe_topology(target: RedisTarget, wait: float = 3.0) -> str:
    """What the store sees of its Redis: the mode, the master and its replicas (on Cluster
    every master with its slots and replicas), each node with the latency of one PING."""
    if target.mode == "sentinel":
        return await _describe_sentinel(target, wait)
    if target.mode == "cluster":
        return await _describe_cluster(target, wait)
    client = Redis.from_url(
        target.url,
        socket_timeout=wait,
        socket_connect_timeout=wait,
        retry=_retry(0),
        decode_responses=True,
        **(target.auth() if target.credentials else {}),  # else the URL carries its own
    )
    try:
        latency = await _latency_ms(client)
        info = await client.info("replication")
    finally:
        await client.aclose()
    fields: dict[str, Any] = info
    replicas = int(fields.get("connected_slaves", 0))
    return (
        f"single {target.where}: {fields.get('role', '?')}, {latency:.1f} ms, {replicas} replica(s)"
    )


async def _describe_sentinel(target: RedisTarget, wait: float) -> str:
    login = target.sentinel_login()
    lines: list[str] = []
    master: tuple[str, int] | None = None
    replicas: list[tuple[str, int]] = []
    addresses = [host_port(address, 26379) for address in target.sentinels]
    clients = [_node_client(target, host, port, wait, login) for host, port in addresses]
    try:
        # Every sentinel at once: one that does not answer costs the wait once, not once each.
        pings = await asyncio.gather(*map(_latency_ms, clients), return_exceptions=True)
        for (host, port), sentinel, ping in zip(addresses, clients, pings, strict=True):
            try:
                if isinstance(ping, BaseException):
                    raise ping
                lines.append(f"sentinel {host}:{port} {ping:.1f} ms")
                if master is None:
                    found = await sentinel.execute_command(  # type: ignore[no-untyped-call]
                        "SENTINEL", "GET-MASTER-ADDR-BY-NAME", target.sentinel_master
                    )
                    if found:
                        master = (str(found[0]), int(found[1]))
                        raw = await sentinel.execute_command(  # type: ignore[no-untyped-call]
                            "SENTINEL", "REPLICAS", target.sentinel_master
                        )
                        replicas = [_sentinel_entry(r) for r in raw]
            except NETWORK_ERRORS as exc:
                lines.append(f"sentinel {host}:{port} unreachable ({why_unreachable(exc)})")
    finally:
        for sentinel in clients:
            await sentinel.aclose()
    if master is None:
        return f"sentinel: no sentinel knows master {target.sentinel_master!r}; " + "; ".join(lines)
    nodes = [await _node_line(target, "master", *master, wait)]
    nodes += [await _node_line(target, "replica", h, p, wait) for h, p in replicas]
    return f"sentinel master {target.sentinel_master}: " + "; ".join(nodes + lines)


def _sentinel_entry(raw: Any) -> tuple[str, int]:
    """One entry of SENTINEL REPLICAS (a flat field/value list, or a dict in RESP3)."""
    fields = raw if isinstance(raw, dict) else dict(zip(raw[::2], raw[1::2], strict=True))
    return str(fields["ip"]), int(fields["port"])


@dataclass(frozen=True, slots=True)
class ClusterNodeInfo:
    """One line of CLUSTER NODES."""

    node_id: str
    address: str  # host:port
    role: str  # master | replica
    master_id: str  # a replica's master ('-' for a master)
    failed: bool
    slots: int  # how many slots a master serves

    @classmethod
    def parse(cls, line: str) -> ClusterNodeInfo:
        fields = line.split()
        flags = fields[2].split(",")
        slots = 0
        for spec in fields[8:]:
            if spec.startswith("["):  # a slot being migrated or imported
                continue
            first, _, last = spec.partition("-")
            slots += int(last or first) - int(first) + 1
        return cls(
            node_id=fields[0],
            address=fields[1].split("@")[0],
            role="master" if "master" in flags else "replica",
            master_id=fields[3],
            failed="fail" in flags or "fail?" in flags,
            slots=slots,
        )


async def cluster_nodes(target: RedisTarget, wait: float) -> tuple[str, list[ClusterNodeInfo]]:
    """The cluster's state and nodes, as the first node that answers sees them."""
    failures: list[str] = []
    for address in target.cluster_nodes:
        host, port = host_port(address, 6379)
        client = _node_client(target, host, port, wait)
        client.response_callbacks = {}  # both replies as text, as Redis sends them
        try:
            info = await client.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]
            raw = await client.execute_command("CLUSTER NODES")  # type: ignore[no-untyped-call]
        except NETWORK_ERRORS as exc:
            failures.append(f"{address} unreachable ({why_unreachable(exc)})")
            continue
        finally:
            await client.aclose()
        fields = dict(line.split(":", 1) for line in str(info).splitlines() if ":" in line)
        nodes = [ClusterNodeInfo.parse(line) for line in str(raw).splitlines() if line.strip()]
        return fields.get("cluster_state", "?").strip(), nodes
    raise RedisConnectionError("no cluster node answers: " + "; ".join(failures))


async def _describe_cluster(target: RedisTarget, wait: float) -> str:
    state, nodes = await cluster_nodes(target, wait)
    masters = sorted((n for n in nodes if n.role == "master"), key=lambda n: n.address)
    by_id = {n.node_id: n for n in nodes}
    parts: list[str] = []
    for master in masters:
        line = await _node_line(target, "master", *host_port(master.address, 6379), wait)
        parts.append(f"{line}, {master.slots} slots" + (" (failed)" if master.failed else ""))
        for replica in sorted(nodes, key=lambda n: n.address):
            if replica.role == "replica" and replica.master_id == master.node_id:
                line = await _node_line(target, "replica", *host_port(replica.address, 6379), wait)
                parts.append(line + (" (failed)" if replica.failed else ""))
    orphans = [n for n in nodes if n.role == "replica" and n.master_id not in by_id]
    parts += [f"replica {n.address} of an unknown master" for n in orphans]
    replicas = sum(1 for n in nodes if n.role == "replica")
    return f"cluster {state}, {len(masters)} master(s), {replicas} replica(s): " + "; ".join(parts)
