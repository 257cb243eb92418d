"""AccessPolicy: static rules, rate limits (in memory or in a shared store), refusal notices,
and the dedupe claim made in the same store round trip."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import fakeredis
import pytest

from gateway.access import NOT_ALLOWED, RATE_LIMITED, AccessPolicy
from gateway.config import AccessSettings
from gateway.messages import ChatRef, Inbound, InboundKind, UserRef
from gateway.store.base import Batch, Store
from gateway.store.embedded import EmbeddedStore
from gateway.store.redis import RedisStore


@pytest.fixture(params=["embedded", "shared"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "embedded":
        local = EmbeddedStore(tmp_path)
        yield local
        await local.close()
    else:
        yield RedisStore.from_client(
            fakeredis.FakeAsyncRedis(decode_responses=True), key_prefix="a"
        )


def msg(
    user: str = "7", chat: str = "c1", n: int = 0, kind: InboundKind = InboundKind.USER
) -> Inbound:
    return Inbound(
        event_id=f"e{user}-{chat}-{n}",
        chat=ChatRef(platform="telegram", chat_id=chat),
        sender=UserRef(platform="telegram", user_id=user),
        text="hi",
        kind=kind,
    )


async def test_allow_list_block_list_admins_and_rules(store: Store) -> None:
    policy = AccessPolicy(
        AccessSettings(
            admins=["telegram:1"],
            allowed_users=["telegram:2"],
            blocked_users=["telegram:3"],
            rate_limit_per_minute=0,
        ),
        store,
    )
    policy.add_rule(lambda m: "not in this chat" if m.chat.chat_id == "banned" else None)
    assert (await policy.check(msg("1", chat="banned"))).allowed  # admins pass every rule
    assert (await policy.check(msg("2"))).allowed
    refused = await policy.check(msg("9"))
    assert not refused.allowed and refused.reason == NOT_ALLOWED and refused.notify
    assert not (await policy.check(msg("3"))).allowed
    ruled = await policy.check(msg("2", chat="banned"))
    assert ruled.reason == "not in this chat"
    # The refused person is told once per chat per hour, not on every message.
    again = await policy.check(msg("9", n=1))
    assert not again.allowed and not again.notify
    assert (await policy.check(msg("9", chat="c2"))).notify
    assert (await policy.check(msg("9", kind=InboundKind.AGENT))).allowed
    assert policy.permits(msg("2")) and not policy.permits(msg("9"))


async def test_rate_limit_per_person(store: Store) -> None:
    policy = AccessPolicy(AccessSettings(admins=["telegram:1"], rate_limit_per_minute=3), store)
    results = [await policy.check(msg("7", n=i)) for i in range(5)]
    assert [r.allowed for r in results] == [True, True, True, False, False]
    assert results[3].reason == RATE_LIMITED and results[3].notify
    assert not results[4].notify  # one notice per minute window
    assert (await policy.check(msg("8"))).allowed  # others are not affected
    assert all([(await policy.check(msg("1", n=i))).allowed for i in range(6)])  # admins


async def test_dedupe_and_extra_operations_in_one_check(store: Store) -> None:
    policy = AccessPolicy(AccessSettings(rate_limit_per_minute=5), store)
    first = await policy.check(msg(), dedupe=("seen:e1", 60))
    assert first.allowed and not first.duplicate and first.also_results == []
    repeat = await policy.check(msg(), dedupe=("seen:e1", 60))
    assert repeat.duplicate and not repeat.allowed
    await store.acquire_lease("lease:x", "owner-1", 30)
    also = Batch().lease_owner("lease:x").acquire_lease("lease:y", "me", 30)
    checked = await policy.check(msg(n=2), dedupe=("seen:e2", 60), also=also)
    assert checked.allowed and checked.also_results == ["owner-1", True]
    # A refused sender costs no store work beyond the notice.
    blocked = AccessPolicy(AccessSettings(blocked_users=["telegram:7"]), store)
    refused = await blocked.check(msg(n=3), also=Batch().get("anything"))
    assert not refused.allowed and refused.also_results == []
