"""A gateway process for the scheduler failover test: the real App (settings from CHATGATE_*
env) with a recording adapter that appends every message it sends to the file named in argv[1].

    python -m tests.e2e.scheduler_worker sent.jsonl
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from gateway.app.app import App, load_settings
from tests.fakes.recording_adapter import RecordingAdapter


async def main(log_path: Path) -> None:
    app = App(load_settings())
    app.add_adapter(RecordingAdapter(log_path=log_path))
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    await app.start()
    print(f"ready {app.instance_id}", flush=True)
    try:
        await stopping.wait()
    finally:
        await app.stop()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
