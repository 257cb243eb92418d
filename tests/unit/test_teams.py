"""Teams logic without a gateway: token checks against the fake issuer, activities normalized,
which serviceUrls are trusted, settings, cards."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from microsoft_agents.activity import Activity
from pydantic import ValidationError

from adapters.teams.auth import (
    ActivityAuth,
    Claims,
    Forbidden,
    KeysUnavailable,
    Unauthorized,
    check_activity,
)
from adapters.teams.cards import button_card
from adapters.teams.conversations import trusted_service_url
from adapters.teams.normalize import (
    CONNECTOR_PREFIX,
    DOWNLOAD_PREFIX,
    button_press,
    conversation_id,
    message_inbound,
    submitted_data,
)
from adapters.teams.settings import TeamsSettings
from adapters.teams.token import BotToken, Certificate, TokenUnavailable
from gateway.sdk import AttachmentKind, Button, ChatKind
from tests.fakes.teams import (
    ALICE,
    APP_ID,
    CHANNEL,
    GROUP,
    PERSONAL,
    TENANT,
    FakeBotFramework,
)


@pytest.fixture
async def bf() -> AsyncIterator[FakeBotFramework]:
    async with FakeBotFramework() as server:
        yield server


@pytest.fixture
async def auth(bf: FakeBotFramework) -> AsyncIterator[ActivityAuth]:
    async with aiohttp.ClientSession() as session:
        yield ActivityAuth(
            session,
            metadata_url=f"{bf.url}/openid",
            issuer="https://api.botframework.com",
            app_id=APP_ID,
        )


async def test_a_token_from_the_issuer_is_accepted(
    bf: FakeBotFramework, auth: ActivityAuth
) -> None:
    claims = await auth.verify(f"Bearer {bf.token()}")
    assert claims.service_url == bf.service_url
    assert claims.endorsements == ("msteams",)
    check_activity(claims, service_url=bf.service_url.rstrip("/"), channel_id="msteams")


@pytest.mark.parametrize(
    "header",
    ["", "Basic abc", "Bearer", "Bearer not.a.jwt", "bearer x y"],
)
async def test_headers_that_are_no_bearer_jwt_are_refused(auth: ActivityAuth, header: str) -> None:
    with pytest.raises(Unauthorized):
        await auth.verify(header or None)


async def test_forged_and_misaddressed_tokens_are_refused(
    bf: FakeBotFramework, auth: ActivityAuth
) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for token in (
        bf.token(key=other),
        bf.token(audience="another-bot"),
        bf.token(issuer="https://sts.windows.net/evil/"),
        bf.token(expires_in=-600),  # past the five minutes of allowed skew
    ):
        with pytest.raises(Unauthorized):
            await auth.verify(f"Bearer {token}")


async def test_a_token_for_another_channel_or_service_url_is_forbidden() -> None:
    claims = Claims({"serviceurl": "https://smba.trafficmanager.net/emea/"}, ("msteams",))
    check_activity(claims, service_url="https://smba.trafficmanager.net/emea", channel_id="msteams")
    with pytest.raises(Forbidden):
        check_activity(claims, service_url="https://evil.example/", channel_id="msteams")
    with pytest.raises(Forbidden):
        check_activity(
            claims, service_url="https://smba.trafficmanager.net/emea/", channel_id="webchat"
        )
    with pytest.raises(Forbidden):  # a token without the claim covers no serviceUrl
        check_activity(Claims({}), service_url="https://x.example/", channel_id="msteams")


async def test_unknown_key_ids_refetch_at_most_once_a_minute(
    bf: FakeBotFramework, auth: ActivityAuth
) -> None:
    await auth.verify(f"Bearer {bf.token()}")
    bf.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # rotated
    for _ in range(3):
        with pytest.raises(Unauthorized):
            await auth.verify(f"Bearer {bf.token()}")
    assert bf.key_fetches == 1  # the cached keys: a stranger's tokens cannot make it fetch


async def test_an_unreachable_issuer_is_unavailable_not_unauthorized(bf: FakeBotFramework) -> None:
    async with aiohttp.ClientSession() as session:
        auth = ActivityAuth(session, metadata_url=f"{bf.url}/missing", issuer="x", app_id=APP_ID)
        with pytest.raises(KeysUnavailable):
            await auth.verify(f"Bearer {bf.token()}")


def test_personal_group_and_channel_messages(bf: FakeBotFramework) -> None:
    personal = message_inbound(Activity.model_validate(bf.activity(PERSONAL, text="hi &amp; bye")))
    assert personal.chat.kind is ChatKind.DIRECT and personal.mentioned
    assert personal.chat.space_id == TENANT and personal.text == "hi & bye"
    assert personal.sender.user_id == ALICE["aadObjectId"]
    assert personal.sender.display_name == "Alice"

    group = Activity.model_validate(bf.activity(GROUP, text="hello", kind="groupChat"))
    assert message_inbound(group).chat.kind is ChatKind.GROUP
    assert not message_inbound(group).mentioned

    thread = f"{CHANNEL};messageid=17"
    raw = bf.activity(
        thread, text="what about <at>Bob</at>?", kind="channel", mention=True, id="18"
    )
    inbound = message_inbound(Activity.model_validate(raw))
    assert inbound.mentioned and inbound.text == "what about Bob?"
    assert (inbound.chat.chat_id, inbound.chat.thread_id) == (CHANNEL, "17")
    assert inbound.chat.kind is ChatKind.CHANNEL
    assert conversation_id(inbound.chat) == thread


def test_attachments_become_handles(bf: FakeBotFramework) -> None:
    raw = bf.activity(
        PERSONAL,
        attachments=[
            {"contentType": "image/png", "contentUrl": "https://smba.example/a/1"},
            {
                "contentType": "application/vnd.microsoft.teams.file.download.info",
                "name": "notes.pdf",
                "content": {"downloadUrl": "https://sp.example/notes.pdf?t=1"},
            },
            {"contentType": "text/html", "content": "<p>hi</p>"},
        ],
    )
    image, document = message_inbound(Activity.model_validate(raw)).attachments
    assert image.kind is AttachmentKind.IMAGE
    assert image.file_id == CONNECTOR_PREFIX + "https://smba.example/a/1"
    assert document.name == "notes.pdf" and document.mime_type == "application/pdf"
    assert document.file_id == DOWNLOAD_PREFIX + "https://sp.example/notes.pdf?t=1"


def test_a_card_submit_is_a_button_press(bf: FakeBotFramework) -> None:
    raw = bf.submit(PERSONAL, "bot-7", {"chatgate": "ap:1:once"}, sender=ALICE)
    activity = Activity.model_validate(raw)
    data = submitted_data(activity)
    assert data == "ap:1:once"
    press = button_press(activity, data)
    assert press.message is not None and press.message.message_id == "bot-7"
    assert press.user.user_id == "aad-alice"
    other = Activity.model_validate(bf.activity(PERSONAL, value={"something": "else"}))
    assert submitted_data(other) is None


def test_button_card() -> None:
    rows = ((Button(label="Approve", data="a", style="primary"), Button(label="Deny", data="d")),)
    card = button_card("Run **this**?", rows)
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    actions = card["content"]["actions"]
    assert [a["data"] for a in actions] == [{"chatgate": "a"}, {"chatgate": "d"}]
    assert actions[0]["style"] == "positive" and "style" not in actions[1]


@pytest.mark.parametrize(
    ("url", "trusted"),
    [
        ("https://smba.trafficmanager.net/amer/", True),
        ("http://127.0.0.1:3978/", True),
        ("http://localhost:3978/", True),
        ("http://smba.trafficmanager.net/amer/", False),
        ("https://user:pw@smba.trafficmanager.net/", False),
        ("ftp://x/", False),
        ("https:///nohost", False),
    ],
)
def test_trusted_service_urls(url: str, trusted: bool) -> None:
    assert trusted_service_url(url, allow_local=True) is trusted
    if url.startswith("http://"):  # plain HTTP only when local URLs are allowed
        assert not trusted_service_url(url)


def test_settings_need_a_credential() -> None:
    with pytest.raises(ValidationError, match=r"app_password or teams\.certificate_path"):
        TeamsSettings(app_id="x")
    settings = TeamsSettings(app_id="x", app_password="p")
    assert settings.resolved_token_url.endswith("/botframework.com/oauth2/v2.0/token")
    single = TeamsSettings(app_id="x", app_password="p", tenant_id="t1")
    assert "/t1/oauth2" in single.resolved_token_url


async def test_doctor_gets_a_token_and_the_metadata(bf: FakeBotFramework) -> None:
    import httpx

    from adapters.teams.plugin import PLUGIN

    good = TeamsSettings.model_validate(bf.settings())
    wrong = TeamsSettings.model_validate(bf.settings(app_password="not-it"))
    assert PLUGIN.check is not None
    async with httpx.AsyncClient() as http:
        passed = await PLUGIN.check(good, http)
        failed = await PLUGIN.check(wrong, http)
    assert passed.ok and APP_ID in passed.detail
    assert not failed.ok and "CHATGATE_TEAMS__APP_PASSWORD" in failed.detail
    assert "not-it" not in failed.detail + failed.fix


def test_access_lists() -> None:
    from adapters.teams.access import TeamsAccess
    from gateway.sdk import ChatRef

    access = TeamsAccess(
        TeamsSettings(
            app_id="x", app_password="p", allowed_tenants=[TENANT], allowed_users=["AAD-ALICE"]
        )
    )
    chat = ChatRef(platform="teams", chat_id=PERSONAL, space_id=TENANT)
    assert access.refusal(chat, "aad-alice") is None
    assert access.refusal(chat, "aad-bob") is not None
    elsewhere = chat.model_copy(update={"space_id": "another-tenant"})
    assert "organisation" in (access.refusal(elsewhere, "aad-alice") or "")
    assert not access.tenant_allowed(None)


def _certificate_pem(path: Path) -> x509.Certificate:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "chatgate-bot")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ) + cert.public_bytes(serialization.Encoding.PEM)
    path.write_bytes(pem)
    return cert


async def test_a_certificate_gets_the_reply_token(bf: FakeBotFramework, tmp_path: Path) -> None:
    registered = _certificate_pem(tmp_path / "bot.pem")
    other = _certificate_pem(tmp_path / "other.pem")
    settings = TeamsSettings.model_validate(
        bf.settings(app_password=None, certificate_path=tmp_path / "bot.pem")
    )
    async with aiohttp.ClientSession() as session:

        def token(path: Path) -> BotToken:
            return BotToken(
                session,
                token_url=settings.resolved_token_url,
                client_id=settings.app_id,
                scope=settings.token_scope,
                secret=None,
                certificate=Certificate(path),
            )

        bf.certificate = registered
        assert await token(tmp_path / "bot.pem").get() in bf.tokens
        assert "client_secret" not in bf.token_requests[-1]
        bf.certificate = other  # the app's registered certificate is another one
        with pytest.raises(TokenUnavailable, match="refused the bot's credentials"):
            await token(tmp_path / "bot.pem").get()
