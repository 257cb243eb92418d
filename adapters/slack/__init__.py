"""Slack: mentions, DMs, threads, slash command and Block Kit buttons through slack-bolt."""

from adapters.slack.adapter import SlackAdapter, SlackStartError

__all__ = ["SlackAdapter", "SlackStartError"]
