"""Button data: each field comes back from a press as its declared type, and data that does not
parse is refused before any handler sees it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.sdk.callbacks import CallbackData, CallbackDataError
from gateway.sdk.extensions import INVALID_BUTTON, Extensions
from gateway.sdk.messages import ButtonPress, ChatKind, ChatRef, PressReply, UserRef


class Colour(enum.Enum):
    RED = "r"
    BLUE = "b"


@dataclass(frozen=True)
class Pick(CallbackData, prefix="pk"):
    token: str
    index: int
    answer: Literal["yes", "no"]
    colour: Colour


@dataclass(frozen=True)
class Ranked(CallbackData, prefix="rk"):
    rank: Literal[1, 2, 3]


def test_unpack_gives_each_field_its_declared_type() -> None:
    data = Pick("t0k", 7, "no", Colour.BLUE).pack()
    assert data == "pk:t0k:7:no:b"
    pick = Pick.unpack(data)
    assert pick == Pick("t0k", 7, "no", Colour.BLUE)
    assert type(pick.index) is int and pick.colour is Colour.BLUE
    assert Pick.unpack("pk:t0k:-2:yes:r").index == -2
    assert Ranked.unpack("rk:2").rank == 2 and type(Ranked.unpack("rk:2").rank) is int


@pytest.mark.parametrize(
    "data",
    [
        "pk:t0k:x:yes:r",  # not a number
        "pk:t0k: 7:yes:r",  # int() would take these; pack never writes them
        "pk:t0k:+7:yes:r",
        "pk:t0k:1_000:yes:r",
        "pk:t0k::yes:r",
        "pk:t0k:7:maybe:r",  # outside the Literal
        "pk:t0k:7:YES:r",
        "pk:t0k:7:yes:RED",  # an Enum by its value, not its name
        "pk:t0k:7:yes",  # a field short
        "pk:t0k:7:yes:r:extra",
        "other:t0k:7:yes:r",
        "rk:4",
        "rk:x",
    ],
)
def test_malformed_data_is_a_clean_refusal(data: str) -> None:
    kind = Ranked if data.startswith("rk") else Pick
    with pytest.raises(CallbackDataError, match=f"not {kind.__name__} data"):
        kind.unpack(data)


@given(
    token=st.text(alphabet="abcdef0123456789", min_size=1, max_size=12),
    index=st.integers(min_value=-(10**12), max_value=10**12),
    answer=st.sampled_from(["yes", "no"]),
    colour=st.sampled_from(list(Colour)),
)
def test_what_is_packed_unpacks_to_the_same_value(
    token: str, index: int, answer: Literal["yes", "no"], colour: Colour
) -> None:
    pick = Pick(token, index, answer, colour)
    assert Pick.unpack(pick.pack()) == pick


def test_a_field_type_buttons_cannot_carry_fails_when_the_button_is_made() -> None:
    @dataclass(frozen=True)
    class Weighted(CallbackData, prefix="wt"):
        weight: float

    with pytest.raises(TypeError, match=r"Weighted\.weight: button data fields are"):
        Weighted(0.5).pack()


async def test_a_press_whose_data_does_not_parse_never_reaches_the_handler() -> None:
    seen: list[Pick] = []

    async def handler(press: ButtonPress, data: Pick) -> PressReply:
        seen.append(data)
        return PressReply(toast=f"picked {data.index + 1}")

    extensions = Extensions()
    extensions.add_buttons(Pick, handler)
    chat = ChatRef(platform="fake", chat_id="c1", kind=ChatKind.DIRECT)
    user = UserRef(platform="fake", user_id="u1")

    def press(data: str) -> ButtonPress:
        return ButtonPress(event_id=data, chat=chat, user=user, data=data)

    refused = await extensions.press(press("pk:t0k:seven:yes:r"))
    assert refused.alert and refused.toast == INVALID_BUTTON
    assert seen == []
    answered = await extensions.press(press(Pick("t0k", 2, "yes", Colour.RED).pack()))
    assert answered.toast == "picked 3"
    assert seen == [Pick("t0k", 2, "yes", Colour.RED)]
