"""Shared pytest setup for chatgate. Fixture families live in plugin modules listed below."""

# tests.fixtures_redis: a private redis-server per session (`redis_url`), one per test for
# outage tests (`redis_server`), and stores on it or on disk (`redis_store`, `embedded_store`).
# tests.fixtures_fakes: the fake platform and LLM servers (`llm`, `tg`, `slack`), and no proxy
# variables (slack_sdk ignores NO_PROXY).
# tests.fixtures_terminal: real bwrap sandboxes, local backends (as a throwaway user when
# root), directories another user can enter.
pytest_plugins = ["tests.fixtures_redis", "tests.fixtures_fakes", "tests.fixtures_terminal"]
