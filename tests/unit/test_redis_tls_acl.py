"""The Redis store made from settings, over TLS only (client certificates asked for) and with
ACL users (no default user), behind Sentinel and on a Redis Cluster: the settings reach the
sentinels, the master and replicas they name and every node the cluster client discovers; a
wrong password is refused with a clear error; `chatgate doctor` describes the topology."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.app.app import load_settings
from gateway.app.doctor import run_checks
from gateway.config import Settings
from gateway.store import StoreRefused, redis_target, store_for
from gateway.store.inbox import InboxEntry, IntakeRequest
from gateway.store.redis import RedisStore
from gateway.store.redis_topology import describe_topology
from tests.certs import self_signed
from tests.fixtures_redis_ha import MASTER_NAME
from tests.fixtures_redis_secure import (
    DATA_PASSWORD,
    DATA_USER,
    SENTINEL_PASSWORD,
    SENTINEL_USER,
    SecureClusterSet,
    SecureSentinelSet,
    Tls,
)

pytestmark = pytest.mark.redis

SECRETS = (DATA_PASSWORD, SENTINEL_PASSWORD, "wrong-pw")


def sentinel_section(sentinels: SecureSentinelSet) -> dict[str, Any]:
    return {
        "sentinels": sentinels.addresses,
        "sentinel_master": MASTER_NAME,
        "username": DATA_USER,
        "password": DATA_PASSWORD,
        "sentinel_username": SENTINEL_USER,
        "sentinel_password": SENTINEL_PASSWORD,
        **sentinels.tls.settings(),
    }


def cluster_section(cluster: SecureClusterSet) -> dict[str, Any]:
    return {
        # One node: the client finds the others, and must reach them as it reached this one.
        "cluster_nodes": cluster.addresses[:1],
        "username": DATA_USER,
        "password": DATA_PASSWORD,
        **cluster.tls.settings(),
    }


@pytest.fixture(params=["sentinel", "cluster"])
def secure_redis(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The `[redis]` section for a Sentinel set or a Cluster that speaks TLS only and takes
    ACL users only."""
    if request.param == "sentinel":
        return sentinel_section(request.getfixturevalue("secure_sentinel_set"))
    return cluster_section(request.getfixturevalue("secure_redis_cluster"))


def settings_for(tmp_path: Path, redis: dict[str, Any]) -> Settings:
    prefix = f"tls-{uuid.uuid4().hex[:10]}"
    return load_settings(None, data_dir=str(tmp_path), redis={**redis, "key_prefix": prefix})


async def test_the_store_works_over_tls_as_an_acl_user(
    secure_redis: dict[str, Any], tmp_path: Path
) -> None:
    store = store_for(settings_for(tmp_path, secure_redis))
    try:
        # Keys on every master of a Cluster: connections to the nodes it found, too.
        values = {f"k{n}": f"over tls {n}" for n in range(32)}
        assert all(await asyncio.gather(*(store.set(k, v) for k, v in values.items())))
        assert [await store.get(k) for k in values] == list(values.values())
        entry = InboxEntry("e1", '{"text": "hi"}')
        intake = IntakeRequest(
            session="telegram:1", entry=entry, seen=None, seen_ttl=60, max_queued=5, max_total=50
        )
        assert (await store.intake(intake)).status == "stored"
        [claimed] = await store.claim("worker", lease_ttl=5)
        assert (claimed.session, claimed.entry) == ("telegram:1", entry)
        received: asyncio.Queue[str] = asyncio.Queue()

        async def consume() -> None:
            async with contextlib.aclosing(store.listen("news")) as messages:
                async for message in messages:
                    await received.put(message)

        listener = asyncio.create_task(consume())
        try:
            # Subscribing is asynchronous: publish until the listener hears one.
            for _ in range(200):
                await store.publish("news", "hello")
                with contextlib.suppress(TimeoutError):
                    assert await asyncio.wait_for(received.get(), 0.05) == "hello"
                    break
            else:
                pytest.fail("the listener heard nothing")
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
    finally:
        await store.close()


async def store_refusal(settings: Settings, *, socket_timeout: float = 5.0) -> str:
    """What the store says when the servers refuse its settings."""
    store = RedisStore(  # as store_for() makes it, with the connect timeout given
        key_prefix=settings.redis.key_prefix,
        max_connections=settings.redis.max_connections,
        target=redis_target(settings),
        queue_shards=settings.redis.cluster_shards,
        socket_timeout=socket_timeout,
    )
    try:
        with pytest.raises(StoreRefused) as refused:
            await asyncio.wait_for(store.get("k"), 30)  # not a hang
    finally:
        await store.close()
    message = str(refused.value)
    assert not any(secret in message for secret in SECRETS), message
    return message


async def refusal(tmp_path: Path, section: dict[str, Any]) -> str:
    """What the store, and `chatgate doctor`, say when the servers refuse the login."""
    settings = settings_for(tmp_path, section)
    message = await store_refusal(settings)
    results = {r.name: r for r in await run_checks(settings)}
    assert not results["store"].ok and results["store"].detail == message, results["store"]
    return message


async def test_a_wrong_password_is_refused_with_a_clear_error(
    secure_redis: dict[str, Any], tmp_path: Path
) -> None:
    message = await refusal(tmp_path, {**secure_redis, "password": "wrong-pw"})
    assert "refused the username or password" in message, message
    assert message.endswith("check redis.username and redis.password"), message


async def test_a_wrong_sentinel_password_is_refused_with_a_clear_error(
    secure_sentinel_set: SecureSentinelSet, tmp_path: Path
) -> None:
    section = {**sentinel_section(secure_sentinel_set), "sentinel_password": "wrong-pw"}
    message = await refusal(tmp_path, section)
    assert "refused the username or password" in message, message
    assert message.endswith("check redis.sentinel_username and redis.sentinel_password"), message


def without_client_certificate(section: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    return {k: v for k, v in section.items() if k not in ("tls_certfile", "tls_keyfile")}


def trusting_another_ca(section: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    other, _ = self_signed(tmp_path)
    return {**section, "tls_ca_certs": str(other)}


@pytest.mark.parametrize(
    ("change", "says", "check"),
    [
        (
            without_client_certificate,
            "failed TLS: it refused this client's certificate: tlsv13 alert certificate required",
            "check redis.tls_certfile and redis.tls_keyfile",
        ),
        (
            trusting_another_ca,
            "failed TLS: its certificate is not trusted here: self-signed certificate",
            "check redis.tls_ca_certs",
        ),
    ],
    ids=["no client certificate", "another CA"],
)
async def test_a_certificate_problem_is_refused_with_a_clear_error(
    secure_redis: dict[str, Any],
    tmp_path: Path,
    change: Callable[[dict[str, Any], Path], dict[str, Any]],
    says: str,
    check: str,
) -> None:
    """Not "unavailable, check that it is running" after every backoff: the same settings
    meet the same handshake, so the store gives up at once and names what to fix. Behind
    Sentinel the sentinels refuse it first, which redis-py reports by the error's class only."""
    message = await refusal(tmp_path, change(secure_redis, tmp_path))
    assert says in message and message.endswith(check), message
    assert "<redis" not in message, message


async def test_a_url_to_a_server_whose_ca_is_not_given_names_the_url(
    secure_sentinel_set: SecureSentinelSet, tmp_path: Path
) -> None:
    port = secure_sentinel_set.master.port
    url = f"rediss://{DATA_USER}:{DATA_PASSWORD}@127.0.0.1:{port}/0"
    message = await refusal(tmp_path, {"url": url})
    assert "failed TLS: its certificate is not trusted here" in message, message
    assert message.endswith("check ssl_ca_certs in redis.url"), message


async def test_doctor_names_the_certificate_each_node_refused(
    secure_redis: dict[str, Any], tmp_path: Path
) -> None:
    section = trusting_another_ca(secure_redis, tmp_path)
    target = redis_target(settings_for(tmp_path, section))
    if "sentinels" in section:
        described = await describe_topology(target)
        unreachable = (
            "unreachable (TLS: its certificate is not trusted here: self-signed certificate)"
        )
        assert described.count(unreachable) == 3, described
    else:
        with pytest.raises(RedisConnectionError) as failed:
            await describe_topology(target)
        assert "TLS: its certificate is not trusted here" in str(failed.value)


async def test_doctor_describes_every_node_over_tls(
    secure_redis: dict[str, Any], tmp_path: Path
) -> None:
    settings = settings_for(tmp_path, secure_redis)
    described = await describe_topology(redis_target(settings))
    if "sentinels" in secure_redis:
        assert described.startswith(f"sentinel master {MASTER_NAME}: master 127.0.0.1:")
        assert described.count("replica 127.0.0.1:") == 1, described
        assert described.count("sentinel 127.0.0.1:") == 3, described
    else:
        assert described.startswith("cluster ok, 3 master(s), 3 replica(s): "), described
    assert "unreachable" not in described, described
    results = {r.name: r for r in await run_checks(settings)}
    latency = re.compile(r"[\d.]+ ms")
    assert results["store"].ok, results["store"]
    assert latency.sub("", results["store"].detail) == latency.sub("", described)


async def test_the_store_follows_a_failover_over_tls(
    tmp_path_factory: pytest.TempPathFactory, redis_tls: Tls, tmp_path: Path
) -> None:
    """The master the sentinels name after a failover is reached with the same TLS and user."""
    servers = SecureSentinelSet(tmp_path_factory.mktemp("sentinel-secure-own"), redis_tls)
    servers.start()
    store = store_for(settings_for(tmp_path, sentinel_section(servers)))
    try:
        assert await store.set("before", "1")
        old = servers.master_port()
        servers.server_on(old).kill()
        assert await store.set("after", "2")  # retried through the failover
        assert servers.master_port() != old
        assert await store.get("before") == "1"
    finally:
        await store.close()
        servers.stop()


def without_tls(section: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in section.items() if not k.startswith("tls")}


@pytest.fixture(params=["sentinel", "cluster"])
def plain_redis_with_tls_settings(request: pytest.FixtureRequest, redis_tls: Tls) -> dict[str, Any]:
    """The `[redis]` section of a client that speaks TLS, for a Sentinel set or a Cluster
    that does not."""
    if request.param == "sentinel":
        sentinels = request.getfixturevalue("sentinel_set")
        section = {"sentinels": sentinels.addresses, "sentinel_master": MASTER_NAME}
    else:
        section = {"cluster_nodes": request.getfixturevalue("redis_cluster").addresses[:1]}
    return {**section, **redis_tls.settings()}


async def test_plain_settings_towards_tls_only_servers_are_refused_with_the_setting(
    secure_redis: dict[str, Any], tmp_path: Path
) -> None:
    """A plain command to a TLS port is answered by a reset, which read as an outage."""
    message = await refusal(tmp_path, without_tls(secure_redis))
    assert "speaks TLS only, and these settings connect without TLS" in message, message
    assert message.endswith("use redis.tls = true"), message


async def test_tls_settings_towards_servers_without_tls_are_refused_with_the_setting(
    plain_redis_with_tls_settings: dict[str, Any], tmp_path: Path
) -> None:
    """A TLS handshake to a plain server waits for the connect timeout, which read as an
    outage after every retry. Behind Sentinel `chatgate doctor` names it too, with the
    default 5 s timeout: a silent sentinel does not hold up asking the next, so the
    handshakes wait side by side (one after another they took three times that, past the
    doctor's limit)."""
    settings = settings_for(tmp_path, plain_redis_with_tls_settings)
    # Each handshake waits for the connect timeout: a short one keeps the test short.
    message = await store_refusal(settings, socket_timeout=1.0)
    assert "does not speak TLS, and these settings connect with TLS" in message, message
    assert message.endswith("use redis.tls = false"), message
    if "sentinels" in plain_redis_with_tls_settings:
        described = await describe_topology(redis_target(settings), wait=1.0)
        assert described.count("unreachable (it does not speak TLS)") == 3, described
        results = {r.name: r for r in await run_checks(settings)}
        assert results["store"].detail == message, results["store"]
    else:
        with pytest.raises(RedisConnectionError) as failed:
            await describe_topology(redis_target(settings), wait=1.0)
        assert "unreachable (it does not speak TLS)" in str(failed.value), failed.value


async def test_a_url_in_the_other_protocol_names_the_scheme_to_use(
    secure_sentinel_set: SecureSentinelSet, redis_url: str, tmp_path: Path
) -> None:
    tls_only = f"redis://{DATA_USER}:{DATA_PASSWORD}@127.0.0.1:{secure_sentinel_set.master.port}/0"
    message = await refusal(tmp_path, {"url": tls_only})
    assert "speaks TLS only" in message and message.endswith("use rediss:// in redis.url"), message
    message = await refusal(tmp_path, {"url": redis_url.replace("redis://", "rediss://", 1)})
    assert "does not speak TLS" in message and message.endswith("use redis:// in redis.url"), (
        message
    )


async def test_doctor_names_each_node_in_the_other_protocol(
    secure_redis: dict[str, Any], tmp_path: Path
) -> None:
    target = redis_target(settings_for(tmp_path, without_tls(secure_redis)))
    if "sentinels" in secure_redis:
        described = await describe_topology(target)
        assert described.count("unreachable (it speaks TLS only)") == 3, described
    else:
        with pytest.raises(RedisConnectionError) as failed:
            await describe_topology(target)
        assert "speaks TLS only" in str(failed.value), failed.value
