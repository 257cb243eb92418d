"""Shared pytest setup for chatgate. Fixture families live in plugin modules listed below."""

import asyncio
import logging
import os
from collections.abc import Callable, Iterator, Mapping

import pytest

from gateway.runtime.logs import RedactingFilter

# tests.fixtures_redis: a private redis-server per session (`redis_url`), one per test for
# outage tests (`redis_server`), and stores on it or on disk (`redis_store`, `embedded_store`).
# tests.fixtures_redis_ha: Redis with failover on free ports: a Sentinel set (`sentinel_set`,
# `own_sentinel_set`, `sentinel_store`) and a Redis Cluster of 3 masters + 3 replicas
# (`redis_cluster`, `own_redis_cluster`, `cluster_store`).
# tests.fixtures_redis_secure: the same two over TLS only, with ACL users and no default user
# (`secure_sentinel_set`, `secure_redis_cluster`).
# tests.fixtures_fakes: the fake platform and LLM servers (`llm`, `tg`, `slack`), and no proxy
# variables (slack_sdk ignores NO_PROXY).
# tests.fixtures_terminal: real bwrap sandboxes, local backends (as a throwaway user when
# root), directories another user can enter.
# tests.fixtures_synapse: a real Synapse homeserver per session (`synapse`) for Matrix.
pytest_plugins = [
    "tests.fixtures_redis",
    "tests.fixtures_redis_ha",
    "tests.fixtures_redis_secure",
    "tests.fixtures_fakes",
    "tests.fixtures_terminal",
    "tests.fixtures_synapse",
]


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Async tests run on the loop `chatgate run` takes by default (event_loop = auto: uvloop
    where installed). TEST_EVENT_LOOP=asyncio runs them on asyncio's own loop, the one
    `event_loop = "asyncio"` and platforms without uvloop use."""
    if os.environ.get("TEST_EVENT_LOOP") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return {"uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


@pytest.fixture(autouse=True)
def _process_logging_restored() -> Iterator[None]:
    """A `chatgate` command run in-process sets up logging for the whole process: a handler on
    the root logger, its level, quieter library loggers. Each test gets back the logging it
    started with, so what a later test on the same worker logs and captures never depends on
    which command ran before it (a leaked handler also outlives pytest's capture files)."""
    root = logging.getLogger()
    levels = {
        name: logger.level
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    root_level = root.level
    yield
    for handler in list(root.handlers):
        if any(isinstance(f, RedactingFilter) for f in handler.filters):
            root.removeHandler(handler)
    root.setLevel(root_level)
    for name, level in levels.items():
        logger = logging.getLogger(name)
        if logger.level != level:  # setLevel clears every logger's cache: only where it moved
            logger.setLevel(level)
