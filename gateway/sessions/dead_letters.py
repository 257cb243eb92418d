"""Dead letters: stored messages whose turn failed `MAX_ATTEMPTS` times, set aside for a person.

A message whose turn raises is run again (its lease handed back, a claimer takes it); after
the last attempt the session queue moves it here in the same store step that drops it from
its session's inbox, and tells the chat once. A message whose runs each ended with their
process never raises here: the claim that would start its fourth run sets it aside instead.
`/status`, `chatgate doctor`, the console and `chatgate dead-letters` show them; retrying
puts a message back in its session's inbox as it was, dropping forgets it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from gateway.runtime.metrics import Metrics
from gateway.sdk.outcome import TurnOutcome
from gateway.sessions.fencing import StaleTurn
from gateway.store import keys
from gateway.store.base import Batch, Store, StoreUnavailable
from gateway.store.inbox import InboxEntry, IntakeRequest

if TYPE_CHECKING:
    from gateway.intake.admission import Notifier
    from gateway.turn.runner import TurnJob
    from gateway.turn.states import TurnRun

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
DEAD_LETTERED = (
    f"I could not answer this message: it failed {MAX_ATTEMPTS} times, so I set it aside "
    "for the operator to look at. Please try again in other words."
)
REASON_CHARS = 300
RETRY_LIMIT = 1_000_000  # a retried message is let in past the per-session and total caps


@dataclass(frozen=True)
class DeadLetter:
    id: str  # the stored message's id (its turn id)
    session: str
    payload: str  # the message as stored (JSON)
    reason: str  # the last attempt's error: its type and the start of its message
    attempts: int
    at: float  # when it was set aside (unix time)

    def encode(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def decode(cls, raw: str) -> DeadLetter:
        data = json.loads(raw)
        return cls(
            id=str(data["id"]),
            session=str(data["session"]),
            payload=str(data["payload"]),
            reason=str(data.get("reason", "")),
            attempts=int(data.get("attempts", 0)),
            at=float(data.get("at", 0.0)),
        )

    @classmethod
    def of(cls, session: str, entry: InboxEntry, error: BaseException, attempts: int) -> DeadLetter:
        reason = f"{type(error).__name__}: {error}"[:REASON_CHARS]
        return cls(entry.id, session, entry.payload, reason, attempts, time.time())

    def text(self) -> str:
        """What the message said, for listings (its text field, if it has one)."""
        try:
            text = json.loads(self.payload).get("text", "")
        except (ValueError, AttributeError):
            return ""
        return str(text)


def dead_letter_write(letter: DeadLetter, batch: Batch) -> Batch:
    """The write that records `letter`, for the turn's own commit to carry."""
    return batch.hset(keys.DEAD_LETTERS, letter.id, letter.encode())


class DeadLetters:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def list(self) -> list[DeadLetter]:
        """Every dead letter, oldest first; an entry that does not parse is skipped."""
        letters = []
        for raw in (await self._store.hgetall(keys.DEAD_LETTERS)).values():
            try:
                letters.append(DeadLetter.decode(raw))
            except (ValueError, KeyError, TypeError):
                continue
        return sorted(letters, key=lambda letter: letter.at)

    async def count(self) -> int:
        return len(await self._store.hgetall(keys.DEAD_LETTERS))

    async def get(self, letter_id: str) -> DeadLetter | None:
        raw = await self._store.hget(keys.DEAD_LETTERS, letter_id)
        try:
            return None if raw is None else DeadLetter.decode(raw)
        except (ValueError, KeyError, TypeError):
            return None

    async def retry(self, letter_id: str) -> str | None:
        """Put the message back in its session's inbox with fresh attempts; None when done,
        else why not (one sentence)."""
        letter = await self.get(letter_id)
        if letter is None:
            return f"No dead letter {letter_id!r}; `chatgate dead-letters list` shows them."
        result = await self._store.intake(
            IntakeRequest(
                session=letter.session,
                entry=InboxEntry(letter.id, letter.payload),
                seen=None,
                seen_ttl=60.0,
                max_queued=RETRY_LIMIT,
                max_total=RETRY_LIMIT,
            )
        )
        if result.status != "stored":
            return f"The message could not be stored again ({result.status}); try later."
        await self._store.hdel(keys.DEAD_LETTERS, letter_id)
        return None

    async def drop(self, letter_id: str) -> bool:
        return bool(await self._store.hdel(keys.DEAD_LETTERS, letter_id))


class RunsEndedWithTheirProcess(Exception):
    """A message whose every run ended with the process running it: the reason it is set
    aside without another run."""

    def __init__(self, runs: int) -> None:
        super().__init__(f"the process running it stopped during each of {runs} runs")


async def set_aside(
    lease: TurnRun, job: TurnJob, error: Exception, notifier: Notifier, metrics: Metrics
) -> TurnOutcome | None:
    """The message failed its last attempt: record it as a dead letter in the one store step
    that drops it from the inbox, then tell the chat, once. None when another run took the
    session over meanwhile (that run answers)."""
    letter = DeadLetter.of(lease.session, lease.claimed.entry, error, job.attempt)
    try:
        await lease.dead_letter(dead_letter_write(letter, Batch()))
    except StaleTurn:
        return None
    except StoreUnavailable as exc:
        log.error("dead letter not recorded session=%s error=%s", job.key, exc)
        return TurnOutcome(error=DEAD_LETTERED)
    metrics.inc("dead_letters_total")
    log.error(
        "message set aside as a dead letter session=%s entry=%s attempts=%d reason=%s",
        job.key,
        letter.id,
        letter.attempts,
        type(error).__name__,
    )
    await notifier.say(job.inbound, DEAD_LETTERED)
    return TurnOutcome(error=DEAD_LETTERED)
