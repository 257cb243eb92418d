"""Shared state for the gateway: Redis when `redis.url`, `redis.sentinels` or
`redis.cluster_nodes` is set, else the embedded SQLite store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.store.base import Store, StoreLocked, StoreRefused, StoreUnavailable

if TYPE_CHECKING:
    from pathlib import Path

    from gateway.config import Settings
    from gateway.store.redis_topology import RedisTarget

__all__ = [
    "Store",
    "StoreLocked",
    "StoreRefused",
    "StoreUnavailable",
    "open_store",
    "redis_target",
    "store_for",
]


def open_store(settings: Settings) -> Store:
    """The configured store: Redis connects lazily; the embedded store opens and locks now."""
    if settings.redis.enabled:
        return store_for(settings)
    from gateway.config.data_dir import usable_data_dir
    from gateway.store.embedded import EmbeddedStore

    return EmbeddedStore(usable_data_dir(settings))


def store_for(settings: Settings) -> Store:
    """The configured store, not opened yet: nothing is locked or connected until
    `await store.open()` (the embedded store) or the first command (Redis)."""
    # Each backend is imported only here: redis-py takes ~0.2 s to import, which every CLI
    # command and every start on the embedded store would pay for nothing.
    if settings.redis.enabled:
        from gateway.store.redis import RedisStore

        return RedisStore(
            key_prefix=settings.redis.key_prefix,
            max_connections=settings.redis.max_connections,
            target=redis_target(settings),
            queue_shards=settings.redis.cluster_shards,
        )
    from gateway.config.data_dir import usable_data_dir
    from gateway.store.embedded import EmbeddedStore

    return EmbeddedStore(usable_data_dir(settings), open_now=False)


def redis_target(settings: Settings) -> RedisTarget:
    """The Redis topology the settings name (gateway/store/redis_topology.py)."""
    from gateway.store.redis_topology import RedisTarget

    conf = settings.redis
    credentials = None
    if conf.credentials != "password":
        # Only then: botocore and redis-entraid are optional, and heavy to import.
        from gateway.store.redis_credentials import credentials_for

        credentials = credentials_for(conf)
    return RedisTarget(
        url=conf.url,
        sentinels=tuple(conf.sentinels),
        sentinel_master=conf.sentinel_master,
        cluster_nodes=tuple(conf.cluster_nodes),
        username=conf.username or None,
        password=conf.password.get_secret_value() or None,
        sentinel_username=conf.sentinel_username or None,
        sentinel_password=conf.sentinel_password.get_secret_value() or None,
        db=conf.db,
        tls=conf.tls,
        tls_ca_certs=_path(conf.tls_ca_certs),
        tls_certfile=_path(conf.tls_certfile),
        tls_keyfile=_path(conf.tls_keyfile),
        credentials=credentials,
    )


def _path(path: Path | None) -> str | None:
    return str(path) if path is not None else None
