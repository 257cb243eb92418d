"""A gateway process for the background-task crash test: the real App (settings from CHATGATE_*
env) with a console adapter; it sends one message asking for background work, says so, and
runs until it is killed.

    python -m tests.e2e.background_worker
"""

from __future__ import annotations

import asyncio

from adapters.console import ConsoleAdapter
from gateway.app.app import App, load_settings


async def main() -> None:
    app = App(load_settings())
    console = ConsoleAdapter("chat1", "alice", echo=False)
    app.add_adapter(console)
    await app.start()
    submission = await app.admission.submit(
        console.inbound("please research this in the background")
    )
    await submission.done
    print("sent off", flush=True)
    await asyncio.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    asyncio.run(main())
