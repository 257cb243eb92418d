"""WhatsApp (the Cloud API): direct messages, reply buttons, media and the 24-hour window.

The gateway finds it through `adapters.whatsapp.plugin`; importing this package loads no
HTTP client until an adapter class is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WhatsAppAdapter", "WhatsAppStartError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from adapters.whatsapp import adapter

        return getattr(adapter, name)
    raise AttributeError(name)
