"""A bare aiohttp server that answers every webhook call 200 once it has read the body:
the floor under `burst.py --webhooks --bare-server`.

It listens as the gateway's server does (gateway/runtime/http.py's backlog, the collector
settings and event loop of `chatgate run`), and does nothing else: no secret check, no
parsing, no store. What the burst measures against it is what the HTTP server, the kernel and
the client cost on this machine; the gateway's figure beside it shows what intake adds.
Prints the port it listens on, then serves until stopped.
"""

from __future__ import annotations

import asyncio
import sys
from typing import cast

from aiohttp import web

from gateway.runtime.collector import settle_collector
from gateway.runtime.event_loop import EventLoopChoice, event_loop_runner
from gateway.runtime.http import LISTEN_BACKLOG


async def answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(status=200)


async def serve() -> None:
    app = web.Application(client_max_size=2 * 1024 * 1024)
    app.router.add_post("/telegram/webhook", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=LISTEN_BACKLOG)
    await site.start()
    settle_collector()
    print(runner.addresses[0][1], flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    choice = cast(EventLoopChoice, sys.argv[1] if len(sys.argv) > 1 else "auto")
    event_loop_runner(choice)(serve())
