"""How busy intake is: the messages inside admission now, and the webhook calls an adapter
answers before admission (Telegram's, counted until shortly after their store write), so
that turns give way to intake.

Under a burst, every turn that starts competes for the event loop with the webhook calls still
waiting to be stored and acknowledged; the session queue reads `busy` to start no more turns
than its floor until intake is quiet again (gateway/sessions/pressure.py), and `chatgate run`
holds the garbage collector off meanwhile (gateway/runtime/collector.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

# Messages in admission at once past which intake counts as busy. A message takes a store
# round trip there (about a millisecond); this many at once means a crowd is arriving.
BUSY_ABOVE = 16


class IntakeLoad:
    def __init__(self, busy_above: int = BUSY_ABOVE) -> None:
        self.busy_above = busy_above
        self.in_flight = 0
        self._on_busy: list[Callable[[], None]] = []
        self._on_quiet: list[Callable[[], None]] = []

    @property
    def busy(self) -> bool:
        return self.in_flight > self.busy_above

    def when_busy(self, listener: Callable[[], None]) -> None:
        """Call `listener` each time intake becomes busy."""
        self._on_busy.append(listener)

    def when_quiet(self, listener: Callable[[], None]) -> None:
        """Call `listener` each time intake stops being busy."""
        self._on_quiet.append(listener)

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """One message inside admission for the duration."""
        self.enter()
        try:
            yield
        finally:
            self.leave()

    def enter(self) -> None:
        """One more message or call counts in intake's load, until `leave`."""
        self.in_flight += 1
        if self.in_flight == self.busy_above + 1:
            for listener in self._on_busy:
                listener()

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == self.busy_above:
            for listener in self._on_quiet:
                listener()
