"""Typed button data: what a button carries back to the gateway when someone presses it.

A feature declares its data once as a frozen dataclass with a prefix:

    @dataclass(frozen=True)
    class ApprovalChoice(CallbackData, prefix="ap"):
        request_id: str
        choice: str

`ApprovalChoice("3f2a", "once").pack()` gives `ap:3f2a:once` and checks it against the
tightest platform limit (Telegram's 64 bytes of callback_data) at the moment it is
made, not when a platform rejects the message. `ApprovalChoice.unpack(data)` parses it
back or raises `CallbackDataError`; `Extensions.add_buttons` (gateway/sdk/extensions.py) routes
a press to the handler registered for its class.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

SEPARATOR = ":"
# Telegram's callback_data limit; Discord's custom_id (100) and Slack's value (2000) are larger.
MAX_BYTES = 64


class CallbackDataError(ValueError):
    """Button data that cannot be packed (too long, a separator in a field) or parsed."""


class CallbackData:
    prefix: ClassVar[str]

    def __init_subclass__(cls, *, prefix: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not prefix or SEPARATOR in prefix:
            raise ValueError(f"a callback prefix must be non-empty without {SEPARATOR!r}")
        cls.prefix = prefix

    def pack(self, max_bytes: int = MAX_BYTES) -> str:
        values = [str(getattr(self, f.name)) for f in dataclasses.fields(self)]  # type: ignore[arg-type]
        for value in values:
            if SEPARATOR in value:
                raise CallbackDataError(f"button data field {value!r} contains {SEPARATOR!r}")
        packed = SEPARATOR.join([self.prefix, *values])
        if len(packed.encode()) > max_bytes:
            raise CallbackDataError(
                f"button data {packed!r} is {len(packed.encode())} bytes; the limit is {max_bytes}"
            )
        return packed

    @classmethod
    def unpack(cls, data: str) -> Self:
        prefix, *values = data.split(SEPARATOR)
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        if prefix != cls.prefix or len(values) != len(names):
            raise CallbackDataError(f"not {cls.__name__} data: {data!r}")
        return cls(**dict(zip(names, values, strict=True)))


def prefix_of(data: str) -> str:
    return data.split(SEPARATOR, 1)[0]
