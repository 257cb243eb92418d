"""The default Store for one process: a SQLite file under data_dir that survives restarts."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sqlite3
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gateway.store import embedded_inbox, keys
from gateway.store import embedded_sql as sql
from gateway.store.base import ONCE_SECONDS, Batch, Store, StoreLocked, StoreUnavailable
from gateway.store.inbox import (
    Claimed,
    FinishResult,
    HeldLease,
    InboxEntry,
    IntakeRequest,
    IntakeResult,
    ReplyClaim,
)
from gateway.store.search import SearchDoc
from gateway.store.search_embedded import SCHEMA as SEARCH_SCHEMA
from gateway.store.search_embedded import EmbeddedSearch

log = logging.getLogger(__name__)

_DB_FILE = "chatgate.db"
_LOCK_FILE = "chatgate.lock"
_PURGE_INTERVAL = 60.0  # seconds between sweeps of expired rows
_PURGE_BATCH = 1000  # rows per sweep, so one sweep never stalls the event loop
_LISTEN_BACKLOG = 10_000  # messages a slow listener may fall behind before the oldest are dropped
_DELETE_CHUNK = 500  # keys per DELETE, well under SQLite's bound-parameter limit


def _expires_at(now: float, ttl: float | None) -> float | None:
    if ttl is None:
        return None
    if ttl <= 0:
        raise ValueError(f"ttl must be positive, got {ttl}")
    return now + ttl


def _lock_directory(path: Path) -> int:
    """Hold an exclusive flock on a sidecar file for as long as the store is open."""
    fd = os.open(path / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StoreLocked(
            f"the embedded store in {path} is already in use by another chatgate process "
            f"(pid {holder}); it serves one process only, so set redis.url "
            f"(CHATGATE_REDIS__URL) to run several"
        ) from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


class EmbeddedStore(Store):
    """Store in `path / "chatgate.db"`; one process at a time (see StoreLocked).

    Opens the file and takes the lock when built, or, with `open_now=False`, at `open()`.
    """

    def __init__(self, path: Path, *, open_now: bool = True) -> None:
        self.path = path
        self._listeners: dict[str, set[asyncio.Queue[str | None]]] = {}
        self._opened = False
        self._closed = False
        self._next_purge = 0.0
        self._once: dict[tuple[str, str], float] = {}  # (key, increment id) -> when taken
        if open_now:
            self._open()

    async def open(self) -> None:
        if not self._opened and not self._closed:
            self._open()

    def _open(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock_fd = _lock_directory(self.path)
        except OSError as exc:
            raise StoreUnavailable(f"cannot open the embedded store in {self.path}: {exc}") from exc
        try:
            self._db = self._connect(self.path / _DB_FILE)
        except BaseException:
            self._unlock()
            raise
        try:
            self.inbox = embedded_inbox.load_state(self)
            self._search = EmbeddedSearch(self)
            self._search.load()
        except BaseException:
            self._db.close()
            self._unlock()
            raise
        self._opened = True

    @staticmethod
    def _connect(file: Path) -> sqlite3.Connection:
        try:
            # Autocommit: one-statement operations commit themselves; _transaction() groups
            # the few that need more than one statement.
            db = sqlite3.connect(file, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open the embedded store {file}: {exc}") from exc
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > sql.SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"{file} was written by a newer chatgate (schema {version}); upgrade chatgate"
                )
            db.execute("PRAGMA journal_mode = WAL")
            # NORMAL in WAL mode: a crash of the process loses nothing; a power cut can lose the
            # last commits. No fsync per commit is what makes per-message writes cheap.
            db.execute("PRAGMA synchronous = NORMAL")
            db.executescript(sql.SCHEMA)
            db.executescript(SEARCH_SCHEMA)
        except BaseException as exc:
            db.close()
            if isinstance(exc, sqlite3.Error):
                raise StoreUnavailable(f"cannot open the embedded store {file}: {exc}") from exc
            raise
        return db

    def _unlock(self) -> None:
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)

    # -- SQL helpers ------------------------------------------------------------------

    # Statements run on the event-loop thread: each touches a few rows by primary key and takes
    # 5-30 µs (WAL with synchronous=NORMAL does not fsync on commit), less than a hop to a
    # worker thread would cost. The rare WAL checkpoint stalls the loop for a few ms.
    def _run(self, statement: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(statement, params)
        except sqlite3.DatabaseError as exc:  # disk full, I/O error, corrupt file
            raise self._unavailable(exc) from exc
        except sqlite3.ProgrammingError as exc:
            if self._closed:
                raise self._unavailable(exc) from exc
            raise

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """Group operations into one SQLite transaction (the inbox's atomic steps)."""
        return self._transaction()

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._run(statement, params).fetchall()

    def execute_many(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self._db.executemany(statement, rows)
        except sqlite3.DatabaseError as exc:
            raise self._unavailable(exc) from exc

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        # Re-entrant: a batch groups operations that may open their own transaction.
        if self._db.in_transaction:
            yield
            return
        self._run("BEGIN")
        try:
            yield
        except BaseException:
            self._db.rollback()
            raise
        self._run("COMMIT")

    def _unavailable(self, exc: Exception) -> StoreUnavailable:
        if self._closed:
            return StoreUnavailable("the embedded store is closed")
        return StoreUnavailable(f"the embedded store in {self.path} failed: {exc}")

    def _now_for_write(self) -> float:
        """Current time; also sweeps expired rows now and then (reads skip them anyway)."""
        now = time.time()
        if now >= self._next_purge:
            self._purge(now)
        return now

    def _purge(self, now: float) -> None:
        with self._transaction():
            removed = self._run(sql.PURGE_KEYS, (now, _PURGE_BATCH)).rowcount
            self._run(sql.PURGE_LEASES, (now,))
        # A full batch means there is more: come back soon rather than all at once.
        self._next_purge = now + (1.0 if removed >= _PURGE_BATCH else _PURGE_INTERVAL)

    # -- batches ----------------------------------------------------------------------

    async def run(self, batch: Batch) -> list[Any]:
        if len(batch.ops) < 2:
            return await super().run(batch)  # one statement commits itself
        # One transaction, one commit: the operations never suspend, so nothing else on the
        # loop can slip a statement in between.
        with self._transaction():
            return await super().run(batch)

    # -- plain values ---------------------------------------------------------------

    async def get(self, key: str) -> str | None:
        row = self._run(sql.GET, (key, time.time())).fetchone()
        return None if row is None else str(row[0])

    async def set(
        self, key: str, value: str, *, ttl: float | None = None, only_if_absent: bool = False
    ) -> bool:
        now = self._now_for_write()
        params = (key, value, _expires_at(now, ttl), now)
        if only_if_absent:
            return self._run(sql.SET_NX, params).rowcount == 1
        self._run(sql.SET, params[:3])
        return True

    async def delete(self, *keys: str) -> int:
        now = time.time()
        count = 0
        for i in range(0, len(keys), _DELETE_CHUNK):
            chunk = keys[i : i + _DELETE_CHUNK]
            marks = ",".join("?" * len(chunk))
            statement = f"DELETE FROM keys WHERE key IN ({marks}) RETURNING expires_at"
            rows = self._run(statement, chunk).fetchall()
            count += sum(1 for (expires_at,) in rows if expires_at is None or expires_at > now)
        return count

    async def incr(
        self, key: str, amount: int = 1, *, ttl: float | None = None, once: str | None = None
    ) -> int:
        now = self._now_for_write()
        if once is not None and self._taken(key, once, now):
            current = await self.get(key)
            return int(current or 0)
        row = self._run(sql.INCR, (key, amount, _expires_at(now, ttl), now)).fetchone()
        if once is not None:
            self._once[key, once] = now
        return int(row[0])

    def _taken(self, key: str, once: str, now: float) -> bool:
        """Whether the increment `once` of `key` was added. Its caller is this process (the
        store serves one), so the ids are kept in memory, oldest first."""
        while self._once and next(iter(self._once.values())) < now - ONCE_SECONDS:
            del self._once[next(iter(self._once))]
        return (key, once) in self._once

    async def expire(self, key: str, ttl: float) -> bool:
        now = time.time()
        return self._run(sql.EXPIRE, (key, _expires_at(now, ttl), now)).rowcount == 1

    # -- hashes ---------------------------------------------------------------------

    async def hset(self, name: str, field: str, value: str) -> None:
        now = self._now_for_write()
        with self._transaction():
            self._run(sql.CONTAINER, (name, "h", now))
            self._run(sql.HSET, (name, field, value))

    async def hget(self, name: str, field: str) -> str | None:
        row = self._run(sql.HGET, (name, "h", time.time(), field)).fetchone()
        return None if row is None else str(row[0])

    async def hdel(self, name: str, *fields: str) -> int:
        if not fields:
            return 0
        marks = ",".join(f"?{i}" for i in range(4, 4 + len(fields)))
        statement = f"{sql.HDEL} AND field IN ({marks})"
        with self._transaction():
            removed = self._run(statement, (name, "h", time.time(), *fields)).rowcount
            if removed:
                # Like Redis, a hash without fields does not exist.
                self._run(sql.DROP_EMPTY_HASH, (name,))
        return removed

    def hash_now(self, name: str) -> dict[str, str]:
        """`hgetall` for code that runs before the loop does (loading the inbox's state)."""
        rows = self._run(sql.HGETALL, (name, "h", time.time())).fetchall()
        return {str(field): str(value) for field, value in rows}

    async def hgetall(self, name: str) -> dict[str, str]:
        rows = self._run(sql.HGETALL, (name, "h", time.time())).fetchall()
        return {str(field): str(value) for field, value in rows}

    # -- lists ----------------------------------------------------------------------

    async def push(self, key: str, value: str, *, max_len: int | None = None) -> int:
        if max_len is not None and max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len}")
        now = self._now_for_write()
        with self._transaction():
            self._run(sql.CONTAINER, (key, "l", now))
            self._run(sql.PUSH, (key, value))
            if max_len is not None:
                self._run(sql.TRIM, (key, max_len))
            length: int = self._run(sql.LIST_LEN, (key, "l", now)).fetchone()[0]
        return length

    async def list_range(self, key: str, start: int = 0, end: int = -1) -> list[str]:
        length: int = self._run(sql.LIST_LEN, (key, "l", time.time())).fetchone()[0]
        # Redis LRANGE semantics: inclusive end, negatives count from the tail, clamp to the list.
        if start < 0:
            start = max(length + start, 0)
        if end < 0:
            end += length
        end = min(end, length - 1)
        if start > end:
            return []
        rows = self._run(sql.LIST_SLICE, (key, end - start + 1, start)).fetchall()
        return [str(value) for (value,) in rows]

    def replace_item(self, key: str, old: str, new: str) -> bool:
        """Put `new` in the place of the oldest list item equal to `old`."""
        with self._transaction():
            row = self._run(sql.FIND_ITEM, (key, old)).fetchone()
            if row is None:
                return False
            self._run("UPDATE items SET value = ?3 WHERE key = ?1 AND seq = ?2", (key, row[0], new))
        return True

    async def remove_item(self, key: str, value: str) -> bool:
        """Drop the oldest list item equal to `value` (an emptied list stops existing)."""
        with self._transaction():
            row = self._run(sql.FIND_ITEM, (key, value)).fetchone()
            if row is None:
                return False
            self._run("DELETE FROM items WHERE key = ?1 AND seq = ?2", (key, row[0]))
            self._run(sql.DROP_EMPTY_LIST, (key,))
        return True

    def list_length(self, key: str) -> int:
        length: int = self._run(sql.LIST_LEN, (key, "l", time.time())).fetchone()[0]
        return length

    def list_head(self, key: str) -> str | None:
        """A list's oldest item (None when it is empty)."""
        row = self._run(sql.LIST_SLICE, (key, 1, 0)).fetchone()
        return None if row is None else str(row[0])

    def list_first_two(self, key: str) -> list[str]:
        return [str(value) for (value,) in self._run(sql.LIST_SLICE, (key, 2, 0)).fetchall()]

    def append(self, key: str, value: str) -> None:
        """`push` without reading the length back (the inbox counts for itself)."""
        now = self._now_for_write()
        with self._transaction():
            self._run(sql.CONTAINER, (key, "l", now))
            self._run(sql.PUSH, (key, value))

    def pending_lists(self, prefix: str) -> list[tuple[str, int]]:
        """(key, length) of every live list whose key starts with `prefix`."""
        rows = self._run(sql.LISTS_WITH_PREFIX, (prefix + "%", time.time())).fetchall()
        return [(str(key), int(count)) for key, count in rows]

    async def pop_head(self, key: str, *, last: bool | None = None) -> None:
        """Drop a list's oldest item (a list left empty stops existing, as on Redis);
        `last`: whether it is the only item, when the caller knows."""
        with self._transaction():
            self._run(sql.POP_HEAD, (key,))
            if last is not False:
                self._run(sql.DROP_EMPTY_LIST, (key,))

    # -- leases ---------------------------------------------------------------------

    async def acquire_lease(self, name: str, owner: str, ttl: float) -> bool:
        now = self._now_for_write()
        return self._run(sql.ACQUIRE, (name, owner, _expires_at(now, ttl), now)).rowcount == 1

    async def renew_lease(self, name: str, owner: str, ttl: float) -> bool:
        now = time.time()
        return self._run(sql.RENEW, (name, owner, _expires_at(now, ttl), now)).rowcount == 1

    async def release_lease(self, name: str, owner: str) -> bool:
        return self._run(sql.RELEASE, (name, owner, time.time())).rowcount == 1

    async def lease_owner(self, name: str) -> str | None:
        if name.startswith(keys.SESSION_LEASE_PREFIX):  # the inbox keeps these in memory
            session = name.removeprefix(keys.SESSION_LEASE_PREFIX)
            return self.inbox.holder(session, time.time())
        row = self._run(sql.OWNER, (name, time.time())).fetchone()
        return None if row is None else str(row[0])

    # -- the session inbox (gateway/store/embedded_inbox.py) ---------------------------

    async def intake(self, request: IntakeRequest) -> IntakeResult:
        return await embedded_inbox.intake(self, request)

    async def claim(
        self, owner: str, lease_ttl: float, *, scan: int = 64, limit: int = 1
    ) -> list[Claimed]:
        return await embedded_inbox.claim(self, owner, lease_ttl, max(scan, limit), limit)

    async def finish(
        self,
        session: str,
        entry_id: str,
        owner: str,
        writes: Batch,
        *,
        keep: bool,
        lease_ttl: float,
        record: str | None = None,
        index: SearchDoc | None = None,
        token: int | None = None,
        absorbed: tuple[str, ...] = (),
    ) -> FinishResult:
        return await embedded_inbox.finish(
            self,
            session,
            entry_id,
            owner,
            writes,
            keep=keep,
            lease_ttl=lease_ttl,
            record=record,
            index=index,
            token=token,
            absorbed=absorbed,
        )

    async def renew_sessions(self, held: list[HeldLease], ttl: float) -> list[bool]:
        return await embedded_inbox.renew(self, held, ttl)

    async def claim_reply(
        self, session: str, token: int, entry_id: str, value: str, ttl: float
    ) -> ReplyClaim:
        return await embedded_inbox.claim_reply(self, session, token, entry_id, value, ttl)

    async def fenced_write(self, session: str, token: int, writes: Batch) -> bool:
        return await embedded_inbox.fenced_write(self, session, token, writes)

    async def inbox_stats(self) -> tuple[int, float]:
        return await embedded_inbox.stats(self)

    async def pending(self, session: str) -> list[InboxEntry]:
        return [InboxEntry.decode(raw) for raw in await self.list_range(keys.pending(session))]

    async def remove_pending(self, session: str, entry_id: str) -> bool:
        return await embedded_inbox.remove_pending(self, session, entry_id)

    async def replace_pending(self, session: str, message_id: str, payload: str) -> bool:
        return await embedded_inbox.replace_pending(self, session, message_id, payload)

    async def drop_pending(self, session: str) -> int:
        return await embedded_inbox.drop_pending(self, session)

    # -- pub/sub (this process only) --------------------------------------------------

    async def publish(self, channel: str, message: str) -> None:
        if self._closed:
            raise StoreUnavailable("the embedded store is closed")
        for queue in self._listeners.get(channel, ()):
            _offer(queue, message)

    async def listen(self, channel: str) -> AsyncGenerator[str, None]:
        if self._closed:
            return
        # None is the end marker that close() sends.
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=_LISTEN_BACKLOG)
        listeners = self._listeners.setdefault(channel, set())
        listeners.add(queue)
        try:
            while (message := await queue.get()) is not None:
                yield message
        finally:
            listeners.discard(queue)
            if not listeners and self._listeners.get(channel) is listeners:
                del self._listeners[channel]

    @property
    def search(self) -> EmbeddedSearch:
        return self._search

    # -- lifecycle ------------------------------------------------------------------

    async def ping(self) -> None:
        self._run("SELECT 1")

    def abandon(self) -> None:
        if self._opened and not self._closed:
            self._db.close()
            self._unlock()
        self._closed = True

    async def close(self) -> None:
        if self._closed:
            return
        if not self._opened:
            self._closed = True
            return
        try:
            self._search.close()
        except StoreUnavailable as exc:  # the documents are stored; the next start indexes them
            log.warning("search terms not indexed at close error=%s", exc)
        self._closed = True
        for queues in self._listeners.values():
            for queue in queues:
                _offer(queue, None)
        self._db.close()
        self._unlock()

    def lease_renewal_twin(self) -> Callable[[], Store] | None:
        # Leases live in memory here, under their own lock: the thread renews them directly.
        return lambda: self

    @property
    def shared(self) -> bool:
        return False


def _offer(queue: asyncio.Queue[str | None], message: str | None) -> None:
    """Queue without waiting; a listener that fell far behind loses its oldest messages."""
    if queue.full():
        queue.get_nowait()
        log.warning("store.listen backlog full, dropped the oldest message")
    queue.put_nowait(message)
