"""The data directory must exist and be writable before anything opens it.

Checked once at start (and by `chatgate config check`) so a wrong `data_dir` is one config
error naming the setting, not a failure deep inside the store, the approvals key or skills.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from gateway.config import ConfigError, Settings


def usable_data_dir(settings: Settings) -> Path:
    """Create `data_dir` if needed and prove it writable; ConfigError in one line otherwise."""
    path = settings.data_dir.expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        # A real write: access() says yes to root on a read-only mount.
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            [
                f"data_dir: cannot use {path} ({reason}); set data_dir (CHATGATE_DATA_DIR) "
                "to a directory chatgate may create and write"
            ]
        ) from None
    return path
