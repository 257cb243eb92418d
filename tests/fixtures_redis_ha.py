"""Fixtures that run Redis with failover on 127.0.0.1: a Sentinel set (a master, a replica and
three sentinels) and, for the Cluster tests, a Redis Cluster of three masters and three
replicas. Each process is a real redis-server on a free port."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio
import redis

from gateway.store.redis import RedisStore
from gateway.store.redis_topology import RedisTarget
from tests.fixtures_redis import RedisServer, free_port

MASTER_NAME = "chatgate-master"
DOWN_AFTER_MS = 1000  # a master silent this long is down (tests: fast failover)


class Sentinel:
    """One `redis-server --sentinel` watching MASTER_NAME."""

    def __init__(
        self, workdir: Path, master_port: int, binary: str, password: str | None = None
    ) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.password = password
        auth = f"requirepass {password}\nsentinel auth-pass {MASTER_NAME} {password}\n"
        self.conf = workdir / f"sentinel-{self.port}.conf"
        # A sentinel rewrites its own file (epochs, what it learnt), so each has one.
        self.conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {workdir}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} 10000\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n" + (auth if password else "")
        )
        log = (workdir / f"sentinel-{self.port}.log").open("ab")
        with log:
            self._proc = subprocess.Popen(
                [binary, str(self.conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
            )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(
            port=self.port, password=self.password, socket_timeout=1, decode_responses=True
        )

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class SentinelSet:
    """A master, one replica and three sentinels that agree on them."""

    def __init__(self, workdir: Path, password: str | None = None) -> None:
        self.workdir = workdir
        self.password = password
        self.master = RedisServer(workdir / "master", password=password)
        self.replica = RedisServer(workdir / "replica", password=password)
        self.sentinels: list[Sentinel] = []

    def start(self, timeout: float = 30.0) -> None:
        for server in (self.master, self.replica):
            server.workdir.mkdir(parents=True, exist_ok=True)
        # Either may become the master, so both start the first sync at once (not after
        # the default 5 s wait for more replicas).
        for server in (self.master, self.replica):
            server.extra_args = self._data_node_args()
        self.master.start()
        self.replica.extra_args += ["--replicaof", "127.0.0.1", str(self.master.port)]
        self.replica.start()
        self.sentinels = [self._sentinel() for _ in range(3)]
        # Ready when every sentinel knows the replica and the two other sentinels: only
        # then can two of them agree that the master is down and elect one to fail over.
        deadline = time.monotonic() + timeout
        while not self._replica_in_sync() or not all(
            self._knows_everyone(s) for s in self.sentinels
        ):
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail("the sentinels did not find each other and the replica in time")
            time.sleep(0.2)

    def _data_node_args(self) -> list[str]:
        """Options of the master and the replica alike: either may become the master."""
        args = ["--repl-diskless-sync-delay", "0"]
        return args + (["--masterauth", self.password] if self.password else [])

    def _sentinel(self) -> Sentinel:
        return Sentinel(self.workdir, self.master.port, self.master.binary, self.password)

    def _replica_in_sync(self) -> bool:
        client = self.data_client(self.replica.port)
        try:
            return client.info("replication").get("master_link_status") == "up"
        except redis.RedisError:
            return False
        finally:
            client.close()

    @staticmethod
    def _knows_everyone(sentinel: Sentinel) -> bool:
        client = sentinel.client()
        try:
            # A plain client (no `return_responses`) gets the parsed reply: a dict.
            state = cast(dict[str, Any], client.sentinel_master(MASTER_NAME))
            return int(state["num-other-sentinels"]) == 2 and int(state["num-slaves"]) == 1
        except redis.RedisError:
            return False
        finally:
            client.close()

    def data_client(self, port: int) -> redis.Redis:
        return redis.Redis(
            port=port, password=self.password, socket_timeout=1, decode_responses=True
        )

    @property
    def addresses(self) -> list[str]:
        return [s.address for s in self.sentinels]

    def target(self) -> RedisTarget:
        return RedisTarget(
            sentinels=tuple(self.addresses), sentinel_master=MASTER_NAME, password=self.password
        )

    def master_port(self) -> int:
        """The port of the master the sentinels name now."""
        for sentinel in self.sentinels:
            client = sentinel.client()
            try:
                # (host, port), or None while the sentinel knows no master of that name.
                address = cast(
                    "tuple[str, int] | None", client.sentinel_get_master_addr_by_name(MASTER_NAME)
                )
                if address is None:
                    continue
                return int(address[1])
            except (redis.RedisError, TypeError):
                continue
            finally:
                client.close()
        raise RuntimeError("no sentinel answers")

    def replica_port(self) -> int:
        """The port of the data node that is not the master now."""
        master = self.master_port()
        return next(s.port for s in (self.master, self.replica) if s.port != master)

    def wait_for_new_master(self, old_port: int, timeout: float = 30.0) -> float:
        """Seconds until the sentinels name another master than `old_port`, and it is one."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            port = self.master_port()
            if port != old_port:
                check = self.data_client(port)
                try:
                    if check.info("replication")["role"] == "master":
                        return time.monotonic() - started
                except redis.RedisError:
                    pass
                finally:
                    check.close()
            time.sleep(0.1)
        raise TimeoutError(f"no failover within {timeout} s")

    def server_on(self, port: int) -> RedisServer:
        return self.master if self.master.port == port else self.replica

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        self.replica.stop()
        self.master.stop()


@pytest.fixture(scope="session")
def sentinel_set(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSet]:
    """A Sentinel set shared by the session's contract tests (they separate by key prefix)."""
    servers = SentinelSet(tmp_path_factory.mktemp("sentinel"))
    servers.start()
    yield servers
    servers.stop()


@pytest.fixture
def own_sentinel_set(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSet]:
    """A Sentinel set of this test's own, for failover tests."""
    servers = SentinelSet(tmp_path_factory.mktemp("sentinel-own"))
    servers.start()
    yield servers
    servers.stop()


@pytest_asyncio.fixture
async def sentinel_store(sentinel_set: SentinelSet) -> AsyncIterator[RedisStore]:
    store = RedisStore(key_prefix=f"test-{uuid.uuid4().hex[:12]}", target=sentinel_set.target())
    yield store
    await store.close()


CLUSTER_NODE_TIMEOUT_MS = 1500  # a master silent this long fails over (tests: fast failover)


def cluster_port() -> int:
    """A free port below 55536 whose cluster bus port (port + 10000) is free too."""
    for _ in range(200):
        port = free_port()
        if port >= 55536:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port below 55536 with a free bus port")


def cli_for(server: str) -> str:
    """The cli that came with `server` (valkey-cli beside a valkey-server), else redis-cli."""
    for name in ("valkey-cli", "redis-cli"):
        if (beside := Path(server).with_name(name)).is_file():
            return str(beside)
    return shutil.which("redis-cli") or "redis-cli"


class RedisClusterSet:
    """A Redis Cluster of three masters, each with one replica, on 127.0.0.1."""

    def __init__(self, workdir: Path, password: str | None = None) -> None:
        self.workdir = workdir
        self.password = password
        self.nodes: list[RedisServer] = []

    def start(self, timeout: float = 60.0) -> None:
        for n in range(6):
            where = self.workdir / f"node{n}"
            where.mkdir(parents=True, exist_ok=True)
            server = self._node(where)
            server.extra_args += [
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(where / "nodes.conf"),
                "--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS),
                "--repl-diskless-sync-delay", "0",
            ]  # fmt: skip
            server.start()
            self.nodes.append(server)
        create = [
            cli_for(self.nodes[0].binary),
            "--cluster", "create",
            *(f"127.0.0.1:{s.port}" for s in self.nodes),
            "--cluster-replicas", "1", "--cluster-yes",
            *self._cli_options(),
        ]  # fmt: skip
        done = subprocess.run(create, capture_output=True, timeout=timeout, check=False)
        if done.returncode != 0:
            self.stop()
            pytest.fail(f"redis-cli --cluster create failed: {done.stdout!r} {done.stderr!r}")
        deadline = time.monotonic() + timeout
        adopted = False
        while not all(self._ready(s.port) for s in self.nodes) or self._shape() != (3, 3):
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the cluster did not become ok with 3 masters and 3 replicas "
                            f"in sync in time: {self._shape()}")  # fmt: skip
            if not adopted and time.monotonic() > deadline - timeout / 2:
                # On a loaded machine redis-cli's CLUSTER REPLICATE can come before the node
                # knows its master, and the node stays a master without slots.
                self._adopt_orphans()
                adopted = True
            time.sleep(0.2)

    def _node(self, where: Path) -> RedisServer:
        """One node, not started: the cluster options are added to its `extra_args`."""
        server = RedisServer(where, password=self.password, port=cluster_port())
        if self.password:
            server.extra_args = ["--masterauth", self.password]
        return server

    def _cli_options(self) -> list[str]:
        """How the cli reaches the nodes (auth, TLS) when it creates the cluster."""
        return ["-a", self.password, "--no-auth-warning"] if self.password else []

    def client(self, port: int) -> redis.Redis:
        return redis.Redis(
            port=port, password=self.password, socket_timeout=1, decode_responses=True
        )

    def _ready(self, port: int) -> bool:
        """`cluster info` says ok and, on a replica, its link to the master is up."""
        client = self.client(port)
        try:
            info = client.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]
            if info.get("cluster_state") != "ok":
                return False
            replication = client.info("replication")
            return bool(
                replication["role"] == "master" or replication["master_link_status"] == "up"
            )
        except redis.RedisError:
            return False
        finally:
            client.close()

    def _view(self) -> list[list[str]]:
        """CLUSTER NODES as the first live node sees it, one list of fields per node."""
        for server in self.nodes:
            if not server.running:
                continue
            client = self.client(server.port)
            client.response_callbacks.pop("CLUSTER NODES", None)
            try:
                raw = str(client.execute_command("CLUSTER NODES"))  # type: ignore[no-untyped-call]
            except redis.RedisError:
                continue
            finally:
                client.close()
            return [line.split() for line in raw.splitlines() if line.strip()]
        return []

    def _shape(self) -> tuple[int, int]:
        """(masters serving slots, replicas) in the cluster's view."""
        view = self._view()
        masters = sum(1 for n in view if "master" in n[2] and len(n) > 8)
        replicas = sum(1 for n in view if "slave" in n[2])
        return masters, replicas

    def _adopt_orphans(self) -> None:
        """Make each master without slots the replica of a master without one."""
        view = self._view()
        lonely = [n[0] for n in view if "master" in n[2] and len(n) > 8]
        for node in view:
            if "slave" in node[2] and node[3] in lonely:
                lonely.remove(node[3])
        for node in view:
            if "master" in node[2] and len(node) <= 8 and lonely:
                client = self.client(int(node[1].split("@")[0].rsplit(":", 1)[1]))
                try:
                    client.execute_command("CLUSTER REPLICATE", lonely.pop())  # type: ignore[no-untyped-call]
                finally:
                    client.close()

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{s.port}" for s in self.nodes]

    def target(self) -> RedisTarget:
        return RedisTarget(cluster_nodes=tuple(self.addresses), password=self.password)

    def master_of_slot(self, slot: int) -> RedisServer:
        """The node serving `slot` now, as the cluster's live nodes see it."""
        for server in self.nodes:
            if not server.running:
                continue
            client = self.client(server.port)
            try:
                slots = client.execute_command("CLUSTER SLOTS")  # type: ignore[no-untyped-call]
                for start, end, master, *_ in slots:
                    if start <= slot <= end:
                        return self.server_on(int(master[1]))
            except redis.RedisError:
                continue
            finally:
                client.close()
        raise RuntimeError("no cluster node answers")

    def server_on(self, port: int) -> RedisServer:
        return next(s for s in self.nodes if s.port == port)

    def wait_for_failover(self, slot: int, old_port: int, timeout: float = 30.0) -> float:
        """Seconds until a live node serves `slot` in place of `old_port` and the cluster is
        ok again."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                master = self.master_of_slot(slot)
            except RuntimeError:
                master = None
            if master is not None and master.port != old_port and self._ok(master.port):
                return time.monotonic() - started
            time.sleep(0.1)
        raise TimeoutError(f"no failover within {timeout} s")

    def _ok(self, port: int) -> bool:
        client = self.client(port)
        try:
            info = client.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]
            return bool(info.get("cluster_state") == "ok")
        except redis.RedisError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        for server in self.nodes:
            server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterSet]:
    """A Redis Cluster shared by the session's contract tests (they separate by key prefix)."""
    servers = RedisClusterSet(tmp_path_factory.mktemp("cluster"))
    servers.start()
    yield servers
    servers.stop()


@pytest.fixture
def own_redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterSet]:
    """A Redis Cluster of this test's own, for failover tests."""
    servers = RedisClusterSet(tmp_path_factory.mktemp("cluster-own"))
    servers.start()
    yield servers
    servers.stop()


@pytest_asyncio.fixture
async def cluster_store(redis_cluster: RedisClusterSet) -> AsyncIterator[RedisStore]:
    store = RedisStore(key_prefix=f"test-{uuid.uuid4().hex[:12]}", target=redis_cluster.target())
    yield store
    await store.close()
