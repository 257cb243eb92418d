"""A terminal platform: `chatgate chat` and `chatgate ask` talk to the agent through it."""

from adapters.console.adapter import PLATFORM, ConsoleAdapter

__all__ = ["PLATFORM", "ConsoleAdapter"]
