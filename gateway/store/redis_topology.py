"""Where the Redis store connects: one server (`redis.url`), a master found through Sentinel
(`redis.sentinels` + `redis.sentinel_master`), or a Redis Cluster (`redis.cluster_nodes`); and
the redis-py client for each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster, Sentinel
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

NETWORK_ERRORS = (RedisConnectionError, RedisTimeoutError)

Mode = Literal["single", "sentinel", "cluster"]


def host_port(address: str, default_port: int) -> tuple[str, int]:
    """"host:port" (or "[v6]:port", or a bare host) as a pair."""
    parts = urlsplit(f"//{address}")
    if not parts.hostname:
        raise ValueError(f"{address!r} is not host:port")
    return parts.hostname, parts.port or default_port


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """One of the three topologies, with the credentials and TLS every node shares. In Sentinel
    and Cluster mode `url` is unused; the username, password and TLS settings apply to the data
    nodes (and to the sentinels too, unless `sentinel_password` is given)."""

    url: str = ""
    sentinels: tuple[str, ...] = ()
    sentinel_master: str = ""
    cluster_nodes: tuple[str, ...] = ()
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None
    db: int = 0
    tls: bool = False
    tls_ca_certs: str | None = None

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
        if self.mode == "cluster":
            return "cluster " + ",".join(self.cluster_nodes)
        if self.mode == "sentinel":
            return f"sentinel master {self.sentinel_master} via " + ",".join(self.sentinels)
        parts = urlsplit(self.url)
        if parts.scheme == "unix":
            return f"unix://{parts.path}"
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Passwords to mask in messages."""
        found = [self.password, self.sentinel_password, urlsplit(self.url).password]
        return tuple({s for p in found if p for s in (p, unquote(p))})


def _retry(retries: int) -> Retry:
    # After a timeout a retried INCR or RPUSH may apply twice (the first may have run before its
    # reply was lost); counters here are rate limits and lists are logs, where that is harmless.
    return Retry(
        ExponentialWithJitterBackoff(cap=1.0, base=0.05), retries, supported_errors=NETWORK_ERRORS
    )


def open_client(
    target: RedisTarget,
    *,
    max_connections: int,
    socket_timeout: float,
    retries: int,
    health_check_interval: float = 0,
    raw_replies: bool = True,
) -> Redis | RedisCluster:
    """A redis-py client for `target`; it connects on first use. With `raw_replies`, replies
    come as Redis sends them (no redis-py shaping), as the store's parsing expects."""
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": socket_timeout,
        "socket_keepalive": True,
        "health_check_interval": health_check_interval,
        "retry": _retry(retries),
    }
    if raw_replies:
        # The store reads replies in RESP2's shapes (HGETALL as a flat list).
        common["protocol"] = 2
    credentials: dict[str, Any] = {}
    if target.username:
        credentials["username"] = target.username
    if target.password:
        credentials["password"] = target.password
    tls: dict[str, Any] = {}
    if target.tls:
        tls = {"ssl": True, "ssl_ca_certs": target.tls_ca_certs}
    client: Redis | RedisCluster
    if target.mode == "cluster":
        nodes = [ClusterNode(*host_port(a, 6379)) for a in target.cluster_nodes]
        cluster_kwargs = {k: v for k, v in common.items() if k != "retry"}
        client = RedisCluster(
            startup_nodes=nodes,
            max_connections=max_connections,
            retry=Retry(ExponentialWithJitterBackoff(cap=1.0, base=0.05), retries),
            **cluster_kwargs,
            **credentials,
            **tls,
        )
    elif target.mode == "sentinel":
        sentinel_auth = dict(credentials)
        if target.sentinel_password is not None:
            sentinel_auth["password"] = target.sentinel_password
        sentinel = Sentinel(  # type: ignore[no-untyped-call]
            [host_port(a, 26379) for a in target.sentinels],
            sentinel_kwargs={
                "socket_timeout": socket_timeout,
                "socket_connect_timeout": socket_timeout,
                "decode_responses": True,
                **sentinel_auth,
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
        client = Redis.from_pool(pool)
    if raw_replies:
        client.response_callbacks = {}
    return client
