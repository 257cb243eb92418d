"""Typed button data: what a button carries back to the gateway when someone presses it.

A feature declares its data once as a frozen dataclass with a prefix:

    @dataclass(frozen=True)
    class ApprovalChoice(CallbackData, prefix="ap"):
        request_id: str
        choice: Literal["once", "session", "always", "deny"]

`ApprovalChoice("3f2a", "once").pack()` gives `ap:3f2a:once` and checks it against the
tightest platform limit (Telegram's 64 bytes of callback_data) at the moment it is
made, not when a platform rejects the message. `ApprovalChoice.unpack(data)` parses it
back, each field as its declared type (str, int, a Literal of strings or ints, an Enum),
or raises `CallbackDataError`; `Extensions.add_buttons` (gateway/sdk/extensions.py) routes
a press to the handler registered for its class, and answers data that does not parse
with a refusal.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Self

SEPARATOR = ":"
# Telegram's callback_data limit; Discord's custom_id (100) and Slack's value (2000) are larger.
MAX_BYTES = 64

# What `int` accepts of a press: digits with an optional minus, nothing else (`int()` would
# also take spaces, a plus sign and underscores, which `pack` never writes).
_INT = re.compile(r"-?[0-9]+")

_Parse = Callable[[str], object]


class CallbackDataError(ValueError):
    """Button data that cannot be packed (too long, a separator in a field) or parsed."""


class CallbackData:
    prefix: ClassVar[str]
    # Each field's name and its parser, built from the annotations on first use.
    _parsers: ClassVar[tuple[tuple[str, _Parse], ...] | None] = None

    def __init_subclass__(cls, *, prefix: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not prefix or SEPARATOR in prefix:
            raise ValueError(f"a callback prefix must be non-empty without {SEPARATOR!r}")
        cls.prefix = prefix
        cls._parsers = None

    def pack(self, max_bytes: int = MAX_BYTES) -> str:
        self._fields()  # an unsupported field type fails here, where the button is made
        values = [_text(getattr(self, f.name)) for f in dataclasses.fields(self)]  # type: ignore[arg-type]
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
        fields = cls._fields()
        if prefix != cls.prefix or len(values) != len(fields):
            raise CallbackDataError(f"not {cls.__name__} data: {data!r}")
        parsed: dict[str, object] = {}
        for (name, parse), value in zip(fields, values, strict=True):
            try:
                parsed[name] = parse(value)
            except ValueError:
                raise CallbackDataError(f"not {cls.__name__} data: {data!r}") from None
        return cls(**parsed)

    @classmethod
    def _fields(cls) -> tuple[tuple[str, _Parse], ...]:
        if cls._parsers is None:
            # Resolved on first use: at class creation the dataclass fields are not made yet.
            hints = typing.get_type_hints(cls)
            cls._parsers = tuple(
                (f.name, _parser(cls, f.name, hints[f.name]))
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            )
        return cls._parsers


def _parser(owner: type, name: str, kind: object) -> _Parse:
    """How the text of one field becomes its declared type; ValueError when it cannot."""
    if kind is str:
        return str
    if kind is int:
        return _int
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        members = {_text(member): member for member in kind}
        return lambda value: _one_of(members, value)
    if typing.get_origin(kind) is Literal:
        options = typing.get_args(kind)
        if all(
            isinstance(o, str) or (isinstance(o, int) and not isinstance(o, bool)) for o in options
        ):
            by_text = {str(option): option for option in options}
            return lambda value: _one_of(by_text, value)
    raise TypeError(
        f"{owner.__name__}.{name}: button data fields are str, int, a Literal of str or int, "
        f"or an Enum, not {kind!r}"
    )


def _int(value: str) -> int:
    if not _INT.fullmatch(value):
        raise ValueError(f"not an integer: {value!r}")
    return int(value)


def _one_of(by_text: Mapping[str, object], value: str) -> object:
    try:
        return by_text[value]
    except KeyError:
        raise ValueError(f"not one of {sorted(by_text)}: {value!r}") from None


def _text(value: object) -> str:
    """A field as it is packed: an Enum member by its value, anything else as str()."""
    return str(value.value) if isinstance(value, enum.Enum) else str(value)


def prefix_of(data: str) -> str:
    return data.split(SEPARATOR, 1)[0]
