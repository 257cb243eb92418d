"""The fetch loop of the replica that holds the email lease: take every unseen mail, then wait
with IMAP IDLE (or sleep `poll_interval` where the server has no IDLE or `email.idle` is off),
and reconnect with backoff when the server goes away."""

from __future__ import annotations

import asyncio
import logging
import ssl

from adapters.email.intake import MailIntake
from adapters.email.mailbox import Mailbox, MailboxError
from adapters.email.settings import EmailSettings
from gateway.sdk import SPREAD, Backoff, stop_task

log = logging.getLogger(__name__)

_BACKOFF = Backoff(1.0, cap=60.0, factor=2.0, jitter=SPREAD)
_NOT_STORED_PAUSE = 1.0  # before fetching again mail the store could not take


class MailFetcher:
    def __init__(self, settings: EmailSettings, tls: ssl.SSLContext, intake: MailIntake) -> None:
        self._settings = settings
        self._tls = tls
        self._intake = intake
        self._task: asyncio.Task[None] | None = None
        self.problem = ""  # why the last connection failed; empty while it works
        self.mode = ""  # "idle" or "polling" once connected

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="email fetching")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop_task(task)

    async def _run(self) -> None:
        failures = 0
        while True:
            mailbox = Mailbox(self._settings, self._tls)
            try:
                await mailbox.open()
                self.problem = ""
                failures = 0
                await self._serve(mailbox)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # MailboxError, or a library surprise: reconnect
                if not isinstance(exc, MailboxError):
                    log.exception("email fetching failed unexpectedly")
                failures += 1
                delay = _BACKOFF.delay(failures)
                self.problem = str(exc)
                log.warning("email fetching failed error=%s retry_in=%.1fs", exc, delay)
                await asyncio.sleep(delay)
            finally:
                await asyncio.shield(mailbox.close())

    async def _serve(self, mailbox: Mailbox) -> None:
        settings = self._settings
        idle = settings.idle and mailbox.can_idle
        self.mode = "idle" if idle else "polling"
        log.info("email fetching folder=%s mode=%s", settings.folder, self.mode)
        before = await mailbox.select(settings.folder)
        while True:
            if not await self._drain(mailbox):
                await asyncio.sleep(_NOT_STORED_PAUSE)
                continue
            # Mail that arrived during the drain is taken before waiting: the server may have
            # announced it while a command ran, and will not announce it again in IDLE.
            after = await mailbox.select(settings.folder)
            if after != before:
                before = after
                continue
            if idle:
                await mailbox.wait_for_mail(settings.idle_timeout)
            else:
                await asyncio.sleep(settings.poll_interval)

    async def _drain(self, mailbox: Mailbox) -> bool:
        """Take every unseen mail in order; False when one could not be stored."""
        for uid in await mailbox.unseen():
            if not await self._intake.take(mailbox, uid):
                return False
        return True
