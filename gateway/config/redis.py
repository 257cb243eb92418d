"""The `[redis]` section: one server (`url`), a master behind Sentinel (`sentinels` and
`sentinel_master`) or a Redis Cluster (`cluster_nodes`); none means the embedded store."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, FilePath, SecretStr, field_validator, model_validator

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
    # Files that must exist when the settings load: a missing one is named there, not met
    # later as "No such file or directory" from the TLS layer, without its path.
    tls_ca_certs: FilePath | None = None  # the CA bundle that signed the servers' certificates
    # The gateway's own certificate and key (one PEM file may hold both), for servers that ask
    # clients for one: `tls-auth-clients yes`, Redis's default.
    tls_certfile: FilePath | None = None
    tls_keyfile: FilePath | None = None
    key_prefix: str = "chatgate"
    # Pooled connections for commands: at most four pipelines of many commands are in flight,
    # and each capped-log transaction takes one while it runs.
    max_connections: int = Field(default=64, ge=1, le=100_000)
    # How the data nodes are logged in to: `password` (the username and password above, or the
    # URL's), or a token made afresh for each new connection: `aws-iam` (ElastiCache or MemoryDB
    # IAM auth, signed with the AWS credentials the environment or instance role gives;
    # `pip install 'chatgate[aws]'`) or `azure-entra` (Azure Cache for Redis with Microsoft
    # Entra ID; `pip install 'chatgate[azure]'`).
    credentials: Literal["password", "aws-iam", "azure-entra"] = "password"
    # aws-iam: the replication group (ElastiCache), serverless cache or cluster (MemoryDB) name,
    # its region and service; the IAM-enabled user is `username`.
    aws_cache_name: str = ""
    aws_region: str = ""
    aws_service: Literal["elasticache", "memorydb"] = "elasticache"
    aws_serverless: bool = False  # an ElastiCache serverless cache
    # azure-entra: a service principal (client id, tenant and secret), else the managed
    # identity: user-assigned when `azure_client_id` is set, else the system-assigned one.
    azure_client_id: str = ""
    azure_tenant_id: str = ""
    azure_client_secret: SecretStr = SecretStr("")

    @field_validator("url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix:// (or be empty)")
        if value:
            check_redis_url(value)
        return value

    @field_validator("tls_ca_certs", "tls_certfile", "tls_keyfile", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        # An empty environment variable (`${VAR:-}` in a compose file) means "not set".
        return None if value == "" else value

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
        if self.credentials != "password":
            self._check_token_credentials()
        return self

    def _check_token_credentials(self) -> None:
        mode = f"redis.credentials = {self.credentials}"
        url = urlsplit(self.url)
        if self.password.get_secret_value() or url.password or url.username:
            raise ValueError(
                f"{mode} logs in with a token: leave redis.password unset and the URL without "
                "user or password (the user goes in redis.username)"
            )
        if self.credentials == "aws-iam":
            missing = [f"redis.{n}" for n in ("username", "aws_cache_name", "aws_region")
                       if not getattr(self, n)]  # fmt: skip
            if missing:
                raise ValueError(
                    f"{mode} needs {', '.join(missing)} (the IAM-enabled user, the cache's name "
                    "and its region)"
                )
            if self.aws_serverless and self.aws_service != "elasticache":
                raise ValueError("redis.aws_serverless is for ElastiCache serverless caches only")
            return
        if self.username:
            raise ValueError(f"{mode}: leave redis.username unset (the token names the user)")
        if self.azure_client_secret.get_secret_value():
            missing = [f"redis.{n}" for n in ("azure_client_id", "azure_tenant_id")
                       if not getattr(self, n)]  # fmt: skip
            if missing:
                raise ValueError(
                    f"{mode} with redis.azure_client_secret (a service principal) needs "
                    + " and ".join(missing)
                )
        elif self.azure_tenant_id:
            raise ValueError(
                f"{mode}: redis.azure_tenant_id is for a service principal, which also needs "
                "redis.azure_client_secret (and redis.azure_client_id)"
            )

    @property
    def enabled(self) -> bool:
        """The Redis store is configured (else the embedded one is used)."""
        return bool(self.url or self.sentinels or self.cluster_nodes)
