"""What every adapter shares: the protocol it implements and message splitting.

The protocol itself lives in `gateway.sdk.channels` (the core must not import
adapters); it is re-exported here so adapter code reads from one place.
"""

from __future__ import annotations

from gateway.sdk import Adapter, AdapterContext, Capabilities, DeliveryError, split_text

__all__ = ["Adapter", "AdapterContext", "Capabilities", "DeliveryError", "split_text"]
