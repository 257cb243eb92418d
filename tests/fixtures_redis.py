"""Fixtures that run private redis-server processes (never the machine's 6379) and open stores."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
import pytest_asyncio
import redis

from gateway.store.embedded import EmbeddedStore
from gateway.store.redis import RedisStore


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One redis-server on 127.0.0.1; stop() and start() keep the port. Without persistence
    unless `persistent`: then every write is in its append-only file before Redis answers,
    and a restart finds the data as it was."""

    def __init__(
        self,
        workdir: Path,
        *,
        password: str | None = None,
        # An ACL user that `extra_args` define (`--user ...`): `password` is then its password,
        # not a `requirepass`.
        username: str | None = None,
        unix_socket: Path | None = None,
        tls: tuple[Path, Path] | None = None,  # certificate and key: TLS only, on `port`
        extra_args: Sequence[str] = (),  # more redis-server options (--replicaof ...)
        port: int | None = None,
        persistent: bool = False,
    ) -> None:
        # TEST_REDIS_SERVER runs the tests on another build, e.g. a valkey-server.
        binary = shutil.which(os.environ.get("TEST_REDIS_SERVER", "redis-server"))
        if binary is None:
            pytest.fail(
                "redis-server is not on PATH; install it with `apt-get install -y redis-server`"
            )
        self.binary = binary
        self.workdir = workdir
        self.port = port or free_port()
        self.password = password
        self.username = username
        self.extra_args = list(extra_args)
        self.unix_socket = unix_socket
        self.tls = tls
        self.persistent = persistent
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self._proc is not None, "redis-server is not running"
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = 10.0) -> None:
        if self.running:
            return
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        if self.tls is not None:
            cert, key = self.tls
            args = [self.binary, "--port", "0", "--tls-port", str(self.port)]
            args += ["--bind", "127.0.0.1", "--tls-cert-file", str(cert), "--tls-key-file"]
            args += [str(key), "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"]
        if self.persistent:
            args += ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--save", "", "--appendonly", "no"]
        args += ["--dir", str(self.workdir)]
        if self.password is not None and self.username is None:
            args += ["--requirepass", self.password]
        if self.unix_socket is not None:
            args += ["--unixsocket", str(self.unix_socket), "--unixsocketperm", "700"]
        args += self.extra_args
        log = (self.workdir / "redis.log").open("ab")
        with log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        client = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            username=self.username,
            password=self.password,
            socket_timeout=0.5,
            socket_connect_timeout=0.5,
            ssl=self.tls is not None,
            ssl_ca_certs=str(self.tls[0]) if self.tls is not None else None,
            # Its own certificate is the client's too, for a server that asks for one.
            ssl_certfile=str(self.tls[0]) if self.tls is not None else None,
            ssl_keyfile=str(self.tls[1]) if self.tls is not None else None,
        )
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if self._proc.poll() is not None or time.monotonic() > deadline:
                        tail = (self.workdir / "redis.log").read_text(errors="replace")[-2000:]
                        self.stop()
                        pytest.fail(f"redis-server on port {self.port} did not start:\n{tail}")
                    time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL, as a machine that dies: no shutdown, no goodbye to the replicas."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def silent_server() -> tuple[asyncio.Server, int]:
    """A server on 127.0.0.1 that reads commands and never answers."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            pass
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a redis-server shared by the whole session (tests separate by key prefix)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server.url
    server.stop()


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of this test's own, to stop and restart in outage tests."""
    server = RedisServer(tmp_path_factory.mktemp("redis-own"))
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture
async def redis_store(redis_url: str) -> AsyncIterator[RedisStore]:
    """A RedisStore on the session server with a key prefix no other test uses."""
    store = RedisStore(redis_url, key_prefix=f"test-{uuid.uuid4().hex[:12]}")
    yield store
    await store.close()


@pytest_asyncio.fixture
async def embedded_store(tmp_path: Path) -> AsyncIterator[EmbeddedStore]:
    store = EmbeddedStore(tmp_path / "data")
    yield store
    await store.close()
