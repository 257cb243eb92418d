"""Fake servers on 127.0.0.1 that tests drive real clients against (no mocked SDKs)."""
