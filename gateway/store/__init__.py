"""Shared state for the gateway: Redis when `redis.url` is set, else the embedded SQLite store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.store.base import Store, StoreLocked, StoreUnavailable

if TYPE_CHECKING:
    from gateway.config import Settings

__all__ = ["Store", "StoreLocked", "StoreUnavailable", "open_store", "store_for"]


def open_store(settings: Settings) -> Store:
    """The configured store: Redis connects lazily; the embedded store opens and locks now."""
    if settings.redis.url:
        return store_for(settings)
    from gateway.config.data_dir import usable_data_dir
    from gateway.store.embedded import EmbeddedStore

    return EmbeddedStore(usable_data_dir(settings))


def store_for(settings: Settings) -> Store:
    """The configured store, not opened yet: nothing is locked or connected until
    `await store.open()` (the embedded store) or the first command (Redis)."""
    # Each backend is imported only here: redis-py takes ~0.2 s to import, which every CLI
    # command and every start on the embedded store would pay for nothing.
    if settings.redis.url:
        from gateway.store.redis import RedisStore

        return RedisStore(
            settings.redis.url,
            key_prefix=settings.redis.key_prefix,
            max_connections=settings.redis.max_connections,
        )
    from gateway.config.data_dir import usable_data_dir
    from gateway.store.embedded import EmbeddedStore

    return EmbeddedStore(usable_data_dir(settings), open_now=False)
