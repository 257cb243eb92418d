"""Pairing's sealed codes and grants, and who the access policy lets in with `unknown = pair`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.approvals.seals import EntrySigner
from gateway.config import AccessSettings
from gateway.intake.access import NOT_ALLOWED, AccessPolicy
from gateway.intake.pairing import ALPHABET, CODE_LENGTH, PairingBook
from gateway.runtime.metrics import Metrics
from gateway.sdk.messages import ChatKind, ChatRef, Inbound, UserRef
from gateway.store import keys
from gateway.store.embedded import EmbeddedStore

SAM = UserRef(platform="telegram", user_id="77", display_name="Sam")
EVE = UserRef(platform="telegram", user_id="66", display_name="Eve")
ADA = UserRef(platform="telegram", user_id="1", display_name="Ada")
DM = ChatRef(platform="telegram", chat_id="77", kind=ChatKind.DIRECT)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedStore]:
    local = EmbeddedStore(tmp_path)
    yield local
    await local.close()


def book(store: EmbeddedStore, ttl: float = 600, metrics: Metrics | None = None) -> PairingBook:
    return PairingBook(store, EntrySigner(b"pairing test key" * 2, metrics), ttl)


async def test_a_code_is_short_reused_while_live_and_decided_once(store: EmbeddedStore) -> None:
    pairing = book(store)
    record, new = await pairing.issue(SAM, DM)
    assert new and len(record.code) == CODE_LENGTH and set(record.code) <= set(ALPHABET)
    again, new_again = await pairing.issue(SAM, DM)
    assert again.code == record.code and not new_again
    assert [r.code for r in await pairing.pending()] == [record.code]
    assert await pairing.code(record.code.lower()) == record  # typed in lower case
    assert await pairing.claim(record.code) and not await pairing.claim(record.code)


async def test_an_expired_code_is_gone(store: EmbeddedStore) -> None:
    pairing = book(store, ttl=0.05)
    record, _ = await pairing.issue(SAM, DM)
    await asyncio.sleep(0.1)
    assert await pairing.code(record.code) is None and await pairing.pending() == []


async def test_a_grant_counts_only_as_sealed_for_its_own_person(store: EmbeddedStore) -> None:
    metrics = Metrics()
    pairing = book(store, metrics=metrics)
    record, _ = await pairing.issue(SAM, DM)
    await pairing.grant(record, ADA)
    assert (await pairing.granted(SAM)) is not None
    # Sam's sealed grant copied to Eve's field: the seal names where it belongs.
    sealed = await store.hget(keys.PAIRING_GRANTS, SAM.address)
    assert sealed is not None
    await store.hset(keys.PAIRING_GRANTS, EVE.address, sealed)
    assert await pairing.granted(EVE) is None
    # A grant written with the right shape and a made-up seal.
    forged = json.loads(sealed)
    forged["v"]["user"] = EVE.model_dump(mode="json")
    await store.hset(keys.PAIRING_GRANTS, EVE.address, json.dumps(forged))
    assert await pairing.granted(EVE) is None
    assert metrics.counter("approvals_tampered_total", kind="pairing grant") == 1  # once a place
    assert [g.user_ref.address for g in await pairing.grants()] == [SAM.address]
    assert await pairing.revoke(SAM.address) and await pairing.granted(SAM) is None


def inbound(user: UserRef) -> Inbound:
    chat = ChatRef(platform="telegram", chat_id=user.user_id, kind=ChatKind.DIRECT)
    return Inbound(event_id="e", chat=chat, sender=user, text="hi")


def test_with_pair_an_empty_allow_list_lets_in_only_admins_and_the_paired(
    store: EmbeddedStore,
) -> None:
    settings = AccessSettings(admins=[ADA.address], unknown="pair", blocked_users=[EVE.address])
    access = AccessPolicy(settings, store)
    assert access.refusal(inbound(ADA)) is None
    assert access.refusal(inbound(SAM)) == NOT_ALLOWED and access.unlisted(inbound(SAM))
    assert access.refusal(inbound(SAM), paired=True) is None
    assert not access.unlisted(inbound(EVE))  # blocked people never pair
    assert access.refusal(inbound(EVE), paired=True) == NOT_ALLOWED
    refuse = AccessPolicy(AccessSettings(), store)
    assert refuse.refusal(inbound(SAM)) is None and not refuse.unlisted(inbound(SAM))
