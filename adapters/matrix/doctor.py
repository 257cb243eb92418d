"""`chatgate doctor` for Matrix: the login, and the state of the device's end-to-end crypto.

It reads the crypto store without writing: it reports the device's identity key, whether the
homeserver publishes the same key for the device (a store copied from elsewhere, or lost, is
a device nobody can encrypt to), and the verification state of the devices the bot knows.
It never logs in: with a password and no saved login it says the first start will.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.matrix.client import LOGIN_FILE, MatrixStartError, saved_login
from adapters.matrix.settings import MatrixSettings
from gateway.sdk import CheckResult

if TYPE_CHECKING:
    import httpx

NAME = "matrix"


async def check(settings: MatrixSettings, http: httpx.AsyncClient) -> CheckResult:
    import httpx

    token = settings.access_token.get_secret_value() if settings.access_token else None
    if token is None:
        try:
            saved = saved_login(settings.store_path / LOGIN_FILE, settings.user_id)
        except MatrixStartError as exc:
            return CheckResult(NAME, False, str(exc), "remove the file to log in again")
        if saved is None:
            return CheckResult(
                NAME, True, f"not logged in yet: the first start logs in as {settings.user_id}"
            )
        token = saved[1]
    base = settings.homeserver.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"}
    try:
        who = await http.get(f"{base}/_matrix/client/v3/account/whoami", headers=headers)
        if who.status_code != 200:
            return CheckResult(
                NAME,
                False,
                f"login rejected (HTTP {who.status_code})",
                "check matrix.access_token (or remove login.json under matrix.store_path)",
            )
        device_id = str(who.json().get("device_id", ""))
        query = {"device_keys": {settings.user_id: [device_id]}}
        published = await http.post(
            f"{base}/_matrix/client/v3/keys/query", json=query, headers=headers
        )
        server_keys = published.json() if published.status_code == 200 else {}
    except (httpx.HTTPError, ValueError) as exc:
        return CheckResult(
            NAME, False, f"homeserver unreachable ({type(exc).__name__})", "check matrix.homeserver"
        )
    return _crypto_state(settings, device_id, token, server_keys)


def _crypto_state(
    settings: MatrixSettings, device_id: str, token: str, server_keys: dict[str, Any]
) -> CheckResult:
    from nio import AsyncClient, AsyncClientConfig
    from nio.crypto import TrustState

    who = f"{settings.user_id} device {device_id}"
    store_file = settings.store_path / f"{settings.user_id}_{device_id}.db"
    if not store_file.exists():
        return CheckResult(
            NAME, True, f"logged in as {who}; no crypto store yet (the first start makes it)"
        )
    config = AsyncClientConfig(encryption_enabled=True, store_sync_tokens=False)
    client = AsyncClient(
        settings.homeserver, settings.user_id, store_path=str(settings.store_path), config=config
    )
    client.restore_login(settings.user_id, device_id, token)
    assert client.olm is not None
    ed25519 = str(client.olm.account.identity_keys["ed25519"])
    device = server_keys.get("device_keys", {}).get(settings.user_id, {}).get(device_id, {})
    on_server = device.get("keys", {}).get(f"ed25519:{device_id}")
    devices = [d for d in client.device_store if d.user_id != settings.user_id or d.id != device_id]
    verified = sum(d.trust_state is TrustState.verified for d in devices)
    blacklisted = sum(d.trust_state is TrustState.blacklisted for d in devices)
    # "ignored" is nio's mark for an unverified device the bot encrypts to all the same.
    unverified = len(devices) - verified - blacklisted
    detail = (
        f"logged in as {who}; identity key {_fingerprint(ed25519)}; {len(devices)} other "
        f"devices known: {verified} verified, {unverified} unverified (trusted on first use), "
        f"{blacklisted} blacklisted"
    )
    if on_server is None:
        return CheckResult(NAME, True, detail + "; keys not published yet (the next sync does)")
    if on_server != ed25519:
        return CheckResult(
            NAME,
            False,
            f"{who}: the homeserver publishes another identity key than the crypto store's",
            "restore the device's matrix.store_path, or log in as a new device",
        )
    return CheckResult(NAME, True, detail + "; keys published")


def _fingerprint(key: str) -> str:
    return " ".join(key[i : i + 4] for i in range(0, len(key), 4))
