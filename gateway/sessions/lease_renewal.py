"""The lease renewal thread: session leases renewed on a schedule the event loop cannot starve.

Under a burst the main loop may run seconds behind; a heartbeat on it would let a live turn's
lease lapse and another run take the session. This thread runs its own event loop with its own
store connection and renews every held lease a third of a TTL apart, whatever the main loop is
doing, as long as that loop still runs at all: one that has not run for `stuck_after` seconds
is stuck, and its leases are left to lapse so another run can take its sessions over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from gateway.runtime.loop_lag import LoopLag
from gateway.store.base import Store, StoreUnavailable
from gateway.store.inbox import HeldLease

log = logging.getLogger(__name__)

JOIN_SECONDS = 5.0


class LeaseRenewalThread:
    def __init__(
        self,
        open_store: Callable[[], Store],
        main_store: Store,
        *,
        ttl: float,
        stuck_after: float,
        loop_lag: LoopLag,
        held: Callable[[], list[HeldLease]],
        lost: Callable[[list[HeldLease]], None],
    ) -> None:
        self._open_store = open_store
        self._main_store = main_store
        self._ttl = ttl
        self._stuck_after = stuck_after
        self._loop_lag = loop_lag
        self._held = held  # thread-safe snapshot of what to renew
        self._lost = lost  # called on the main loop with leases another run took over
        self._main_loop: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self.alive = False  # renewing; False: the caller renews on its own loop instead

    def start(self) -> None:
        self._main_loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="lease renewal", daemon=True)
        self._thread.start()
        self._ready.wait(JOIN_SECONDS)

    async def stop(self) -> None:
        if self._thread is None:
            return
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)
        await asyncio.to_thread(self._thread.join, JOIN_SECONDS)
        self._thread = None

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        try:
            store = self._open_store()
        except Exception:
            log.exception("lease renewal thread not started; renewing on the main loop")
            self._ready.set()
            return
        self.alive = True
        self._ready.set()
        stuck = False
        try:
            if store is not self._main_store:
                # A store of its own connects before the first lease is held (as a rule), so
                # no renewal waits for a connection (on Redis Cluster, for the slot map too)
                # and lands long after it was decided. Bounded: with the store down,
                # renewals fail on their own anyway.
                with contextlib.suppress(StoreUnavailable, TimeoutError):
                    await asyncio.wait_for(store.ping(), self._ttl)
            while True:
                stalled = self._loop_lag.stalled_for()
                if stalled > self._stuck_after:
                    if not stuck:
                        log.error(
                            "event loop stuck; session leases left to lapse stalled=%.1f",
                            stalled,
                        )
                    stuck = True
                else:
                    stuck = False
                    await self._renew(store)
                await asyncio.sleep(self._ttl / 3)
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug here must not leave leases unrenewed: the loop takes over
            log.exception("lease renewal thread failed; renewing on the main loop")
        finally:
            self.alive = False
            if store is not self._main_store:
                await store.close()

    async def _renew(self, store: Store) -> None:
        held = self._held()
        if not held:
            return
        try:
            renewed = await store.renew_sessions(held, self._ttl)
        except StoreUnavailable as exc:
            log.warning("session leases not renewed count=%d error=%s", len(held), exc)
            return
        lost = [lease for lease, ok in zip(held, renewed, strict=True) if not ok]
        if lost and self._main_loop is not None and not self._main_loop.is_closed():
            self._main_loop.call_soon_threadsafe(self._lost, lost)
