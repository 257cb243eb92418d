"""Shared pytest setup for chatgate. Fixture families live in plugin modules listed below."""

# tests.fixtures_redis: a private redis-server per session (`redis_url`), one per test for
# outage tests (`redis_server`), and stores on it or on disk (`redis_store`, `embedded_store`).
pytest_plugins = ["tests.fixtures_redis"]
