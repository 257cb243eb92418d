"""Redis with failover that speaks TLS only, asks every client for its certificate and knows
no default user: a Sentinel set (data nodes and sentinels, each with its own ACL user) and a
Redis Cluster of 3 masters + 3 replicas (TLS on the cluster bus too). The certificate, made
with openssl when the fixture starts, serves every server and every client alike."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from gateway.store.redis_topology import RedisTarget
from tests.certs import self_signed
from tests.fixtures_redis import RedisServer, free_port
from tests.fixtures_redis_ha import (
    DOWN_AFTER_MS,
    MASTER_NAME,
    RedisClusterSet,
    Sentinel,
    SentinelSet,
    cluster_port,
)

# The data nodes' user, which the gateway and the sentinels log in as, and the sentinels' own.
DATA_USER, DATA_PASSWORD = "chatgate", "data-s3cret"
SENTINEL_USER, SENTINEL_PASSWORD = "watcher", "watch-s3cret"


def acl_user(name: str, password: str) -> list[str]:
    """redis-server options: `name` may do everything, and nobody else may log in."""
    return ["--user", "default", "off", "--user", name, "on", f">{password}", "~*", "&*", "+@all"]


@dataclass(frozen=True)
class Tls:
    cert: Path  # also the CA that every node and client trusts
    key: Path

    def settings(self) -> dict[str, Any]:
        """The `[redis]` TLS settings of a client that trusts this certificate and shows it."""
        return {
            "tls": True,
            "tls_ca_certs": str(self.cert),
            "tls_certfile": str(self.cert),
            "tls_keyfile": str(self.key),
        }

    def client(self, port: int, username: str, password: str) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1",  # the name the certificate is for
            port=port,
            username=username,
            password=password,
            ssl=True,
            ssl_ca_certs=str(self.cert),
            ssl_certfile=str(self.cert),
            ssl_keyfile=str(self.key),
            socket_timeout=1,
            decode_responses=True,
        )


class SecureSentinel(Sentinel):
    """A sentinel on a TLS port that talks TLS to the data nodes and the other sentinels, logs
    in to the data nodes as DATA_USER and takes only SENTINEL_USER itself."""

    def __init__(self, workdir: Path, master_port: int, binary: str, tls: Tls) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.password = SENTINEL_PASSWORD
        self.tls = tls
        self.conf = workdir / f"sentinel-{self.port}.conf"
        self.conf.write_text(
            f"port 0\ntls-port {self.port}\nbind 127.0.0.1\ndir {workdir}\n"
            f"tls-cert-file {tls.cert}\ntls-key-file {tls.key}\ntls-ca-cert-file {tls.cert}\n"
            "tls-auth-clients yes\ntls-replication yes\n"
            f"user default off\nuser {SENTINEL_USER} on >{SENTINEL_PASSWORD} ~* &* +@all\n"
            f"sentinel sentinel-user {SENTINEL_USER}\nsentinel sentinel-pass {SENTINEL_PASSWORD}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n"
            f"sentinel auth-user {MASTER_NAME} {DATA_USER}\n"
            f"sentinel auth-pass {MASTER_NAME} {DATA_PASSWORD}\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} 10000\n"
        )
        log = (workdir / f"sentinel-{self.port}.log").open("ab")
        with log:
            self._proc = subprocess.Popen(
                [binary, str(self.conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
            )

    def client(self) -> redis.Redis:
        return self.tls.client(self.port, SENTINEL_USER, SENTINEL_PASSWORD)


class SecureSentinelSet(SentinelSet):
    """A master, a replica (replicating over TLS as DATA_USER) and three SecureSentinels."""

    def __init__(self, workdir: Path, tls: Tls) -> None:
        self.workdir = workdir
        self.password = DATA_PASSWORD
        self.tls = tls
        self.master, self.replica = (
            RedisServer(
                workdir / name,
                username=DATA_USER,
                password=DATA_PASSWORD,
                tls=(tls.cert, tls.key),
            )
            for name in ("master", "replica")
        )
        self.sentinels: list[Sentinel] = []

    def _data_node_args(self) -> list[str]:
        return [
            *acl_user(DATA_USER, DATA_PASSWORD),
            *("--masteruser", DATA_USER, "--masterauth", DATA_PASSWORD),
            *("--tls-auth-clients", "yes", "--tls-replication", "yes"),
            *("--repl-diskless-sync-delay", "0"),
        ]

    def _sentinel(self) -> Sentinel:
        return SecureSentinel(self.workdir, self.master.port, self.master.binary, self.tls)

    def data_client(self, port: int) -> redis.Redis:
        return self.tls.client(port, DATA_USER, DATA_PASSWORD)

    def target(self) -> RedisTarget:
        return RedisTarget(
            sentinels=tuple(self.addresses),
            sentinel_master=MASTER_NAME,
            username=DATA_USER,
            password=DATA_PASSWORD,
            sentinel_username=SENTINEL_USER,
            sentinel_password=SENTINEL_PASSWORD,
            **self.tls.settings(),
        )


class SecureClusterSet(RedisClusterSet):
    """3 masters + 3 replicas on TLS ports, TLS on the cluster bus and for replication, and
    DATA_USER the only user (replicas log in to their masters as it too)."""

    def __init__(self, workdir: Path, tls: Tls) -> None:
        super().__init__(workdir, password=DATA_PASSWORD)
        self.tls = tls

    def _node(self, where: Path) -> RedisServer:
        server = RedisServer(
            where,
            username=DATA_USER,
            password=DATA_PASSWORD,
            tls=(self.tls.cert, self.tls.key),
            port=cluster_port(),
        )
        server.extra_args = [
            *acl_user(DATA_USER, DATA_PASSWORD),
            *("--masteruser", DATA_USER, "--masterauth", DATA_PASSWORD),
            *("--tls-auth-clients", "yes", "--tls-replication", "yes", "--tls-cluster", "yes"),
        ]
        return server

    def _cli_options(self) -> list[str]:
        return [
            *("--tls", "--cacert", str(self.tls.cert)),
            *("--cert", str(self.tls.cert), "--key", str(self.tls.key)),
            *("--user", DATA_USER, "--pass", DATA_PASSWORD, "--no-auth-warning"),
        ]

    def client(self, port: int) -> redis.Redis:
        return self.tls.client(port, DATA_USER, DATA_PASSWORD)

    def target(self) -> RedisTarget:
        return RedisTarget(
            cluster_nodes=tuple(self.addresses),
            username=DATA_USER,
            password=DATA_PASSWORD,
            **self.tls.settings(),
        )


@pytest.fixture(scope="session")
def redis_tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return Tls(*self_signed(tmp_path_factory.mktemp("redis-tls")))


@pytest.fixture(scope="session")
def secure_sentinel_set(
    tmp_path_factory: pytest.TempPathFactory, redis_tls: Tls
) -> Iterator[SecureSentinelSet]:
    """A Sentinel set on TLS with ACL users, shared by the session."""
    servers = SecureSentinelSet(tmp_path_factory.mktemp("sentinel-secure"), redis_tls)
    servers.start()
    yield servers
    servers.stop()


@pytest.fixture(scope="session")
def secure_redis_cluster(
    tmp_path_factory: pytest.TempPathFactory, redis_tls: Tls
) -> Iterator[SecureClusterSet]:
    """A Redis Cluster on TLS with an ACL user, shared by the session."""
    servers = SecureClusterSet(tmp_path_factory.mktemp("cluster-secure"), redis_tls)
    servers.start()
    yield servers
    servers.stop()
