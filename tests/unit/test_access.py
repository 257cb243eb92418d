"""AccessPolicy and the admission middlewares that use it: static rules, refusal notices,
rate limits (in memory or in a shared store), and the intake round trip that claims the
event id, counts the rate and takes the session lease at once."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import fakeredis
import pytest

from gateway.config import AccessSettings, RouterSettings
from gateway.intake.access import NOT_ALLOWED, RATE_LIMITED, AccessPolicy
from gateway.intake.admission import (
    Admission,
    AdmissionPipeline,
    Notifier,
    Status,
    Submission,
    finished,
)
from gateway.intake.group_context import GroupContext
from gateway.intake.middlewares import AccessCheck, IntakeRoundTrip, Observe, RateLimit, Validate
from gateway.runtime.metrics import Metrics
from gateway.sdk.extensions import Extensions
from gateway.sdk.messages import ChatKind, ChatRef, Inbound, InboundKind, Outbound, SentRef, UserRef
from gateway.sessions.key import SessionKey
from gateway.sessions.leases import SessionLeases
from gateway.sessions.queue import SessionQueue
from gateway.store import keys
from gateway.store.base import Store
from gateway.store.embedded import EmbeddedStore
from tests.fakeredis_wire import store_over


@pytest.fixture(params=["embedded", "shared"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "embedded":
        local = EmbeddedStore(tmp_path)
        yield local
        await local.close()
    else:
        yield store_over(fakeredis.FakeAsyncRedis(decode_responses=True), key_prefix="a")


def msg(
    user: str = "7",
    chat: str = "c1",
    n: int = 0,
    kind: InboundKind = InboundKind.USER,
    text: str = "hi",
    group: bool = False,
    mentioned: bool = True,
) -> Inbound:
    return Inbound(
        event_id=f"e{user}-{chat}-{n}-{text}",
        chat=ChatRef(
            platform="telegram", chat_id=chat, kind=ChatKind.GROUP if group else ChatKind.DIRECT
        ),
        sender=UserRef(platform="telegram", user_id=user),
        text=text,
        kind=kind,
        mentioned=mentioned,
    )


class Gate:
    """The access part of the chain, ending in a session queue that records what reached it."""

    def __init__(self, store: Store, settings: AccessSettings, extensions: Extensions) -> None:
        self.sent: list[Outbound] = []
        self.reached: list[Admission] = []
        self.store = store
        self.policy = AccessPolicy(settings, store, extensions.access_rules)
        notifier = Notifier(self._send)
        metrics = Metrics()
        self.leases = SessionLeases(store, "inst", 30, metrics)
        self.queue = SessionQueue(
            store=store,
            runner=None,  # type: ignore[arg-type]  # no turn runs: `end` records instead
            leases=self.leases,
            context=GroupContext(store, 5),
            notifier=notifier,
            settings=RouterSettings(),
            metrics=metrics,
            instance_id="inst",
            turn_timeout=60,
            rate_limit=settings.rate_limit_per_minute,
        )
        self.pipeline = AdmissionPipeline(
            start=lambda inbound: Admission(
                inbound, SessionKey("telegram", inbound.chat.chat_id), uuid.uuid4().hex[:8]
            ),
            middlewares=[
                Observe(self.policy, store, GroupContext(store, 5), 60),
                AccessCheck(self.policy, notifier, metrics),
                Validate(RouterSettings(max_message_chars=100), notifier),
                RateLimit(self.policy, notifier, metrics),
                IntakeRoundTrip(
                    store=store,
                    access=self.policy,
                    queue=self.queue,
                    notifier=notifier,
                    dedupe_ttl=60,
                    metrics=metrics,
                ),
            ],
            end=self._end,
            notifier=notifier,
            metrics=metrics,
        )

    async def _send(self, out: Outbound) -> SentRef:
        self.sent.append(out)
        return SentRef(chat=out.chat, message_id=str(len(self.sent)))

    async def _end(self, admission: Admission) -> Submission:
        self.reached.append(admission)
        return finished(Status.QUEUED, session=admission.session)

    async def status(self, inbound: Inbound) -> Status:
        return (await self.pipeline.submit(inbound)).status


async def test_allow_list_block_list_admins_and_rules(store: Store) -> None:
    extensions = Extensions()
    extensions.add_access_rule(lambda m: "not in this chat" if m.chat.chat_id == "banned" else None)
    gate = Gate(
        store,
        AccessSettings(
            admins=["telegram:1"],
            allowed_users=["telegram:2"],
            blocked_users=["telegram:3"],
            rate_limit_per_minute=0,
        ),
        extensions,
    )
    assert await gate.status(msg("1", chat="banned")) is Status.QUEUED  # admins pass every rule
    assert await gate.status(msg("2")) is Status.QUEUED
    assert await gate.status(msg("9")) is Status.REFUSED
    assert [o.text for o in gate.sent] == [NOT_ALLOWED]
    assert await gate.status(msg("3")) is Status.REFUSED
    assert await gate.status(msg("2", chat="banned")) is Status.REFUSED
    assert gate.sent[-1].text == "not in this chat"
    # The refused person is told once per chat per hour, not on every message.
    told = len(gate.sent)
    assert await gate.status(msg("9", n=1)) is Status.REFUSED
    assert len(gate.sent) == told
    assert await gate.status(msg("9", chat="c2")) is Status.REFUSED
    assert len(gate.sent) == told + 1
    assert await gate.status(msg("9", kind=InboundKind.AGENT)) is Status.QUEUED
    assert gate.policy.permits(msg("2")) and not gate.policy.permits(msg("9"))


async def test_rate_limit_per_person(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # Mid-minute, so the per-minute window cannot turn over between the messages.
    monkeypatch.setattr("gateway.intake.access.time.time", lambda: 60 * 1000 + 30.0)
    gate = Gate(store, AccessSettings(admins=["telegram:1"], rate_limit_per_minute=3), Extensions())
    results = [await gate.status(msg("7", n=i)) for i in range(5)]
    assert results == [Status.QUEUED] * 3 + [Status.REFUSED] * 2
    assert [o.text for o in gate.sent] == [RATE_LIMITED]  # one notice per minute window
    assert await gate.status(msg("8")) is Status.QUEUED  # others are not affected
    assert {await gate.status(msg("1", n=i)) for i in range(6)} == {Status.QUEUED}  # admins


async def test_intake_stores_the_message_once_and_takes_the_idle_sessions_lease(
    store: Store,
) -> None:
    gate = Gate(store, AccessSettings(rate_limit_per_minute=5), Extensions())
    assert await gate.status(msg(n=1)) is Status.QUEUED
    assert await gate.status(msg(n=1)) is Status.DUPLICATE
    (admission,) = gate.reached
    stored = admission.intake.stored
    assert stored is not None and stored.status == "stored" and stored.claimed is not None
    assert [e.id for e in await store.pending(str(admission.session))] == [admission.turn_id]
    # Nobody started the turn here (the test's queue only records), so the lease and the
    # reserved slot were handed back: another worker may claim the message at once.
    assert await store.lease_owner(keys.session_lease(admission.session)) is None
    (claimed,) = await store.claim("other:1", 5)
    assert claimed.entry.id == admission.turn_id


async def test_a_command_is_not_stored(store: Store) -> None:
    gate = Gate(store, AccessSettings(rate_limit_per_minute=5), Extensions())
    assert await gate.status(msg(text="/nosuchcommand now")) is Status.QUEUED
    (admission,) = gate.reached
    assert admission.intake.stored is None  # command-shaped: the queue stores it if it must
    assert await store.pending(str(admission.session)) == []


async def test_group_chatter_is_kept_as_context_never_refused(store: Store) -> None:
    gate = Gate(store, AccessSettings(allowed_users=["telegram:2"]), Extensions())
    chatter = msg("2", chat="g", group=True, mentioned=False, text="lunch?")
    assert await gate.status(chatter) is Status.OBSERVED
    assert await gate.status(chatter) is Status.OBSERVED  # a repeat is not kept twice
    stranger = msg("9", chat="g", group=True, mentioned=False, text="spam")
    assert await gate.status(stranger) is Status.OBSERVED
    assert gate.sent == [] and gate.reached == []
    context = GroupContext(store, 5)
    assert await context.take(msg("2", chat="g", group=True)) == ["2: lunch?"]


async def test_empty_and_oversized_messages_are_refused_with_a_reason(store: Store) -> None:
    gate = Gate(store, AccessSettings(rate_limit_per_minute=0), Extensions())
    assert await gate.status(msg(text="   ")) is Status.REFUSED
    assert await gate.status(msg(text="x" * 101)) is Status.REFUSED
    assert [o.text.split(";")[0] for o in gate.sent] == [
        "Your message was empty. Send some text.",
        "Your message has 101 characters",
    ]


async def test_a_replica_announces_itself_as_soon_as_its_leases_start(store: Store) -> None:
    leases = SessionLeases(store, "replica-1", 30, Metrics())
    await leases.start()
    try:
        for _ in range(50):  # the first beat does not wait a third of the TTL (10 s here)
            if await store.hget(keys.REPLICAS, "replica-1") is not None:
                break
            await asyncio.sleep(0.01)
        beat = json.loads(await store.hget(keys.REPLICAS, "replica-1") or "{}")
    finally:
        await leases.stop()
    assert beat["sessions"] == 0 and beat["ts"] > 0
