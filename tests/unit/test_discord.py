"""Unit tests for the Discord adapter's pure parts: access rules, button layout, reply routing,
error classification and settings validation (the wire behaviour is in tests/e2e)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

import discord
import pytest

from adapters.discord.access import NO_DMS, NOT_ALLOWED, NOT_HERE, DiscordAccess
from adapters.discord.adapter import _unanswered
from adapters.discord.buttons import ActionButton, build_view
from adapters.discord.interactions import InteractionReplies
from adapters.discord.normalize import channel_id, chat_ref
from adapters.discord.plugin import PLUGIN as DISCORD
from adapters.discord.sending import delivery_error
from adapters.discord.settings import DiscordSettings
from gateway.app.app import load_settings
from gateway.config import ConfigError
from gateway.intake.admission import Status
from gateway.sdk.messages import Button, ChatKind, ChatRef, UserRef
from gateway.turn.runner import TurnOutcome

GUILD = ChatRef(platform="discord", chat_id="10", kind=ChatKind.GROUP, space_id="1")
THREAD = GUILD.model_copy(update={"thread_id": "11"})
DM = ChatRef(platform="discord", chat_id="20", kind=ChatKind.DIRECT)


def person(user_id: str = "7", *roles: str) -> UserRef:
    return UserRef(platform="discord", user_id=user_id, roles=roles)


def test_empty_lists_allow_everything() -> None:
    access = DiscordAccess(DiscordSettings())
    assert access.reason(GUILD, person()) is None
    assert access.reason(DM, person()) is None


def test_places_users_and_roles() -> None:
    access = DiscordAccess(
        DiscordSettings(
            allowed_guilds=["1"], allowed_channels=["10"], allowed_users=["7"], allowed_roles=["r"]
        )
    )
    assert access.reason(GUILD, person("7")) is None
    assert access.reason(THREAD, person("8", "r")) is None  # a thread counts as its channel
    assert access.reason(GUILD, person("8")) == NOT_ALLOWED
    assert access.reason(GUILD.model_copy(update={"chat_id": "12"}), person("7")) == NOT_HERE
    assert access.reason(GUILD.model_copy(update={"space_id": "2"}), person("7")) == NOT_HERE
    assert access.reason(DM, person("7")) is None  # DMs have no guild or channel rules
    assert access.reason(DM, person("8", "r")) is None


def test_dms_can_be_refused_and_other_platforms_are_not_judged() -> None:
    access = DiscordAccess(DiscordSettings(allow_dms=False, allowed_users=["7"]))
    assert access.reason(DM, person("7")) == NO_DMS
    slack = ChatRef(platform="slack", chat_id="C1")
    assert access.reason(slack, UserRef(platform="slack", user_id="U1")) is None


async def test_view_wraps_wide_rows_and_keeps_at_most_five() -> None:
    wide = tuple(Button(label=f"b{i}", data=f"x:{i}") for i in range(7))
    view = build_view((wide,))
    rows = [item.row for item in view.children]
    assert rows == [0, 0, 0, 0, 0, 1, 1]
    # build_view makes only ActionButtons (asserted below); discord.py types them as Items.
    ids = [cast(ActionButton, item).custom_id for item in view.children]
    assert ids[:2] == ["cg:x:0", "cg:x:1"]
    many = tuple((Button(label="b", data=f"y:{i}"),) for i in range(7))
    assert len(build_view(many).children) == 5
    assert all(isinstance(item, ActionButton) for item in view.children)


async def test_custom_id_fits_discord_and_the_template_takes_any_data() -> None:
    data = "ap:" + "z" * 61  # the longest Button.data (64)
    button = ActionButton(data, "L" * 200, "danger")
    assert len(button.custom_id) <= 100 and button.item.label == "L" * 80
    match = ActionButton.__discord_ui_compiled_template__.fullmatch(button.custom_id)
    assert match is not None and match["data"] == data


def test_replies_route_to_the_interaction_until_the_token_expires() -> None:
    replies = InteractionReplies()
    interaction: Any = SimpleNamespace(id=55)
    marker = replies.open(interaction)
    assert marker == "i:55"
    pending = replies.get(marker)
    assert pending is not None and replies.get("12345") is None and replies.get(None) is None
    replies.sent(pending, 99)
    assert replies.for_message("99") is pending
    pending.expires = time.monotonic() - 1
    assert replies.get(marker) is None and replies.for_message("99") is None
    assert replies.close(marker) is pending


def test_a_command_that_sent_nothing_still_gets_an_answer() -> None:
    assert _unanswered(Status.DUPLICATE, TurnOutcome()) == "This command was already handled."
    assert _unanswered(Status.REFUSED, TurnOutcome(error="refused")).startswith("Sorry")
    assert _unanswered(Status.STARTED, TurnOutcome(cancelled=True)) == "Stopped."
    assert _unanswered(Status.COMMAND, TurnOutcome()) == "Done."
    assert "try again" in _unanswered(None, None)


def test_chat_mapping_and_target_channel() -> None:
    assert chat_ref(discord.Object(10), 1) == GUILD
    assert chat_ref(discord.Object(20), None) == DM
    assert channel_id(THREAD) == 11 and channel_id(GUILD) == 10


def _http_error(kind: type[discord.HTTPException], status: int, code: int) -> discord.HTTPException:
    response: Any = SimpleNamespace(status=status, reason="x")
    return kind(response, {"message": "Missing Permissions", "code": code})


def test_errors_are_classified() -> None:
    forbidden = delivery_error(_http_error(discord.Forbidden, 403, 50013), THREAD, "send")
    assert forbidden.permanent and "Send Messages in Threads" in str(forbidden)
    assert delivery_error(_http_error(discord.NotFound, 404, 10003), GUILD, "send").permanent
    server = delivery_error(_http_error(discord.DiscordServerError, 500, 0), GUILD, "send")
    assert not server.permanent


def test_shard_settings_are_validated() -> None:
    settings = load_settings(None, discord={"shard_ids": [1], "shard_count": 2})
    assert DISCORD.section(settings).shard_ids
    with pytest.raises(ConfigError, match="shard_count"):
        load_settings(None, discord={"shard_ids": [0]})
    with pytest.raises(ConfigError, match="shard_ids"):
        load_settings(None, discord={"shard_ids": [2], "shard_count": 2})
