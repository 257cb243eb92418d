"""The matrix-nio client with its end-to-end crypto store, logged in as the bot's device.

With an access token the device is the token's (whoami names it); with a password the
first start logs in as a new device named `matrix.device_name` and keeps that login in
`store_path/login.json` (0600), so later starts are the same device with the same keys.
The crypto store (nio's SQLite store: Olm account, Megolm sessions, known devices) lives
beside it, one file per device.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import aiohttp
from nio import AsyncClient, AsyncClientConfig, LoginResponse, WhoamiResponse

from adapters.matrix.settings import MatrixSettings

log = logging.getLogger(__name__)

LOGIN_FILE = "login.json"


class MatrixStartError(RuntimeError):
    """The adapter cannot start; the message says what to fix (and never holds a secret)."""


def new_client(settings: MatrixSettings) -> AsyncClient:
    settings.store_path.mkdir(parents=True, exist_ok=True, mode=0o700)
    config = AsyncClientConfig(
        encryption_enabled=True,
        # The sync token is kept in the gateway's store, past stored events only.
        store_sync_tokens=False,
        max_limit_exceeded=3,
        max_timeouts=3,
        request_timeout=30,
    )
    return AsyncClient(
        settings.homeserver.rstrip("/"),
        settings.user_id,
        store_path=str(settings.store_path),
        config=config,
    )


async def log_in(client: AsyncClient, settings: MatrixSettings) -> None:
    """Log `client` in as the bot's device and load that device's crypto store."""
    try:
        if settings.access_token is not None:
            await _with_token(client, settings, settings.access_token.get_secret_value())
        else:
            await _with_password(client, settings)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise MatrixStartError(
            f"cannot reach the Matrix homeserver at {settings.homeserver} "
            f"({type(exc).__name__}): check matrix.homeserver and the network"
        ) from None


async def _with_token(client: AsyncClient, settings: MatrixSettings, token: str) -> None:
    client.access_token = token
    who = await client.whoami()
    if not isinstance(who, WhoamiResponse):
        raise MatrixStartError(
            f"the homeserver refused the access token ({who.status_code}): check "
            "matrix.access_token"
        )
    if who.user_id != settings.user_id:
        raise MatrixStartError(
            f"the access token belongs to {who.user_id}, not matrix.user_id {settings.user_id}"
        )
    if not who.device_id:
        raise MatrixStartError("the access token has no device; log in with a password instead")
    client.restore_login(settings.user_id, who.device_id, token)


async def _with_password(client: AsyncClient, settings: MatrixSettings) -> None:
    saved = saved_login(settings.store_path / LOGIN_FILE, settings.user_id)
    if saved is not None:
        device_id, token = saved
        client.restore_login(settings.user_id, device_id, token)
        return
    assert settings.password is not None
    response = await client.login(settings.password.get_secret_value(), settings.device_name)
    if not isinstance(response, LoginResponse):
        raise MatrixStartError(
            f"the homeserver refused the login ({response.status_code}): check "
            "matrix.user_id and matrix.password"
        )
    _save_login(settings.store_path / LOGIN_FILE, settings.user_id, response)
    log.info(
        "matrix logged in as a new device user=%s device=%s", response.user_id, response.device_id
    )


def saved_login(path: Path, user_id: str) -> tuple[str, str] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise MatrixStartError(f"cannot read the saved Matrix login {path}: {exc}") from None
    if data.get("user_id") != user_id:
        return None  # another account's login: log in afresh
    return str(data["device_id"]), str(data["access_token"])


def _save_login(path: Path, user_id: str, response: LoginResponse) -> None:
    data = {
        "user_id": user_id,
        "device_id": response.device_id,
        "access_token": response.access_token,
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(data, file)


async def share_keys(client: AsyncClient) -> None:
    """What the crypto machine owes the homeserver after a sync: its keys, questions about
    other devices' keys, one-time keys to claim, and to-device messages (room keys)."""
    if client.should_upload_keys:
        await client.keys_upload()
    if client.should_query_keys:
        await client.keys_query()
    if client.should_claim_keys:
        await client.keys_claim(client.get_users_for_key_claiming())
    await client.send_to_device_messages()
