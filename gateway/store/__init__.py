"""Shared state for the gateway: Redis when `redis.url` is set, else the embedded SQLite store."""

from __future__ import annotations

from gateway.config import Settings
from gateway.config.data_dir import usable_data_dir
from gateway.store.base import Store, StoreUnavailable
from gateway.store.embedded import EmbeddedStore, StoreLocked
from gateway.store.redis import RedisStore

__all__ = ["Store", "StoreLocked", "StoreUnavailable", "open_store"]


def open_store(settings: Settings) -> Store:
    """The configured store: Redis connects lazily; the embedded store opens and locks now."""
    if settings.redis.url:
        return RedisStore(
            settings.redis.url,
            key_prefix=settings.redis.key_prefix,
            max_connections=settings.redis.max_connections,
        )
    return EmbeddedStore(usable_data_dir(settings))
