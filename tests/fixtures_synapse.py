"""A real Synapse homeserver for the Matrix tests: one per test session (per xdist worker),
on a free port of 127.0.0.1, SQLite, accounts made with the registration shared secret.

Synapse lives in its own virtualenv (`.venv-synapse`, made by tests/run.sh) so its pins
never meet the project's; CHATGATE_SYNAPSE_PYTHON points elsewhere. Without it the Matrix
tests are skipped with the command that installs it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
SYNAPSE_PYTHON = Path(
    os.environ.get("CHATGATE_SYNAPSE_PYTHON") or ROOT / ".venv-synapse" / "bin" / "python"
)
_START_SECONDS = 90.0  # a loaded machine: Synapse takes about 5 s alone
_CONFIG = """\
server_name: "localhost"
pid_file: {dir}/homeserver.pid
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: {dir}/homeserver.db
log_config: {dir}/log.yaml
media_store_path: {dir}/media
registration_shared_secret: "{secret}"
report_stats: false
signing_key_path: {dir}/signing.key
trusted_key_servers: []
suppress_key_server_warning: true
enable_metrics: false
bcrypt_rounds: 4
url_preview_enabled: false
presence:
  enabled: false
max_upload_size: 50M
rc_message: {{per_second: 1000, burst_count: 1000}}
rc_registration: {{per_second: 1000, burst_count: 1000}}
rc_login:
  address: {{per_second: 1000, burst_count: 1000}}
  account: {{per_second: 1000, burst_count: 1000}}
  failed_attempts: {{per_second: 1000, burst_count: 1000}}
rc_joins:
  local: {{per_second: 1000, burst_count: 1000}}
  remote: {{per_second: 1000, burst_count: 1000}}
rc_invites:
  per_room: {{per_second: 1000, burst_count: 1000}}
  per_user: {{per_second: 1000, burst_count: 1000}}
  per_issuer: {{per_second: 1000, burst_count: 1000}}
rc_key_requests: {{per_second: 1000, burst_count: 1000}}
"""
_LOG_CONFIG = """\
version: 1
formatters:
  precise: {{format: '%(asctime)s %(name)s %(levelname)s %(message)s'}}
handlers:
  file: {{class: logging.FileHandler, filename: {dir}/homeserver.log, formatter: precise}}
root: {{level: WARNING, handlers: [file]}}
disable_existing_loggers: false
"""


@dataclass(frozen=True)
class Account:
    user_id: str
    password: str
    access_token: str
    device_id: str


@dataclass(frozen=True)
class Synapse:
    url: str
    secret: str
    workdir: Path

    async def register(self, name: str, *, admin: bool = False) -> Account:
        """A new account `name` plus a random suffix (tests never share one), logged in."""
        user = f"{name}-{uuid.uuid4().hex[:6]}"
        password = secrets.token_urlsafe(12)
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        async with httpx.AsyncClient(timeout=30) as http:
            nonce = (await http.get(endpoint)).json()["nonce"]
            message = "\0".join([nonce, user, password, "admin" if admin else "notadmin"])
            mac = hmac.new(self.secret.encode(), message.encode(), hashlib.sha1).hexdigest()
            body = {"nonce": nonce, "username": user, "password": password, "admin": admin}
            response = await http.post(endpoint, json={**body, "mac": mac})
            response.raise_for_status()
            data = response.json()
        return Account(data["user_id"], password, data["access_token"], data["device_id"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _synapse_missing() -> str | None:
    # Looked up on disk: importing Synapse to check takes seconds on a loaded machine.
    venv = SYNAPSE_PYTHON.parent.parent
    if not SYNAPSE_PYTHON.exists() or not any(venv.glob("lib/python3*/site-packages/synapse")):
        return f"Synapse is not installed in {venv}: run tests/run.sh (it makes .venv-synapse)"
    return None


def _signing_key() -> str:
    """A homeserver signing key as Synapse writes it (`--generate-keys` would cost a start)."""
    seed = base64.b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    return f"ed25519 a_test {seed}\n"


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    missing = _synapse_missing()
    if missing is not None:
        pytest.skip(missing)
    workdir = tmp_path_factory.mktemp("synapse")
    port, secret = _free_port(), secrets.token_hex(16)
    config = workdir / "homeserver.yaml"
    config.write_text(_CONFIG.format(dir=workdir, port=port, secret=secret))
    (workdir / "log.yaml").write_text(_LOG_CONFIG.format(dir=workdir))
    command = [str(SYNAPSE_PYTHON), "-m", "synapse.app.homeserver", "-c", str(config)]
    (workdir / "signing.key").write_text(_signing_key())
    # Synapse's own environment only: no proxy, nothing of the test run's.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), "LANG": "C.UTF-8"}
    output = (workdir / "stdout.log").open("wb")
    process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, workdir)
        yield Synapse(url, secret, workdir)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        output.close()


def _wait_until_up(url: str, process: subprocess.Popen[bytes], workdir: Path) -> None:
    deadline = time.monotonic() + _START_SECONDS
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = (workdir / "stdout.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"Synapse exited with {process.returncode}:\n{log}")
        try:
            with opener.open(f"{url}/_matrix/client/versions", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"Synapse did not answer within {_START_SECONDS:.0f} s")
