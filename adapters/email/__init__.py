"""Email: IMAP in (IDLE or polling), SMTP out, one session per mail thread.

The gateway finds it through `adapters.email.plugin`; importing this package does not
import aioimaplib or aiosmtplib until the adapter class is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EmailAdapter"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from adapters.email import adapter

        return getattr(adapter, name)
    raise AttributeError(name)
