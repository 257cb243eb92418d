"""The `[redis]` section: one server (`url`), a master behind Sentinel (`sentinels` and
`sentinel_master`) or a Redis Cluster (`cluster_nodes`); none means the embedded store."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.config.base import Section
from gateway.config.urls import check_redis_url


def _check_address(address: str) -> str:
    try:
        parts = urlsplit(f"//{address}")
        port = parts.port
    except ValueError:
        port = None
        parts = None
    if parts is None or not parts.hostname or port is None or port == 0:
        raise ValueError(f"{address!r} is not host:port (e.g. 10.0.0.5:26379)")
    return address


class RedisSettings(Section):
    url: str = ""  # empty (and no sentinels or cluster nodes): the embedded store under data_dir
    # Sentinel: the sentinels' addresses and the name of the master they watch.
    sentinels: list[str] = []
    sentinel_master: str = ""
    # Redis Cluster: some of its nodes (the client discovers the rest), and the number of
    # queue shards: sessions spread over them, each shard a hash tag of its own (more shards
    # spread the inbox over more masters; the claimer reads every shard's head per claim).
    # Changing the number moves sessions to other shards: change it only with an empty inbox.
    cluster_nodes: list[str] = []
    cluster_shards: int = Field(default=16, ge=1, le=1024)
    # For Sentinel and Cluster (a URL carries its own): the ACL user and password of the master and
    # replicas, which the sentinels are asked with too unless `sentinel_password` is set: the
    # sentinels' own password, of their ACL user `sentinel_username` (else of their `requirepass`).
    username: str = ""
    password: SecretStr = SecretStr("")
    sentinel_username: str = ""
    sentinel_password: SecretStr = SecretStr("")
    db: int = Field(default=0, ge=0, le=1_000)  # Sentinel (Cluster has db 0 only); a URL says /0
    tls: bool = False  # Sentinel and Cluster; a URL says rediss://
    tls_ca_certs: Path | None = None  # the CA bundle that signed the servers' certificates
    # The gateway's own certificate and key (one PEM file may hold both), for servers that ask
    # clients for one: `tls-auth-clients yes`, Redis's default.
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None
    key_prefix: str = "chatgate"
    # Pooled connections for commands: at most four pipelines of many commands are in flight,
    # and each capped-log transaction takes one while it runs.
    max_connections: int = Field(default=64, ge=1, le=100_000)

    @field_validator("url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix:// (or be empty)")
        if value:
            check_redis_url(value)
        return value

    @field_validator("sentinels", "cluster_nodes")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        return [_check_address(a.strip()) for a in value]

    @model_validator(mode="after")
    def _one_topology(self) -> RedisSettings:
        chosen = [n for n, v in [("url", self.url), ("sentinels", self.sentinels),
                                 ("cluster_nodes", self.cluster_nodes)] if v]  # fmt: skip
        if len(chosen) > 1:
            raise ValueError(
                "set one of redis.url (one server), redis.sentinels or redis.cluster_nodes, "
                f"not {' and '.join('redis.' + n for n in chosen)}"
            )
        if self.cluster_nodes and self.db:
            raise ValueError("Redis Cluster has database 0 only: leave redis.db unset")
        if self.sentinels and not self.sentinel_master:
            raise ValueError("redis.sentinels needs redis.sentinel_master (the monitored name)")
        if self.sentinel_username and not self.sentinel_password.get_secret_value():
            raise ValueError("redis.sentinel_username needs redis.sentinel_password (its password)")
        if self.tls_keyfile and not self.tls_certfile:
            raise ValueError("redis.tls_keyfile needs redis.tls_certfile (the certificate)")
        if self.sentinel_master and not self.sentinels:
            raise ValueError("redis.sentinel_master needs redis.sentinels (host:port of each)")
        return self

    @property
    def enabled(self) -> bool:
        """The Redis store is configured (else the embedded one is used)."""
        return bool(self.url or self.sentinels or self.cluster_nodes)
