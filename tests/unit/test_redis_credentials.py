"""Login tokens for managed Redis (gateway/store/redis_credentials.py): the ElastiCache and
MemoryDB IAM token checked by a SigV4 verification of its own, its rotation, the store logging
in with it on a real redis-server and Redis Cluster, and the Entra ID provider in the clients."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import jwt
import pytest
import redis as sync_redis
from redis.exceptions import AuthenticationError, RedisClusterException
from redis.exceptions import ConnectionError as RedisConnectionError
from redis_entraid.cred_provider import EntraIdCredentialsProvider

from gateway.app.app import load_settings
from gateway.config import Settings
from gateway.store import redis_target
from gateway.store.base import StoreUnavailable
from gateway.store.redis import RedisStore
from gateway.store.redis_credentials import AwsIamCredentials, Credentials, EntraIdCredentials
from gateway.store.redis_topology import RedisTarget, describe_topology, open_client
from tests.fixtures_redis_ha import MASTER_NAME, RedisClusterSet, SentinelSet

ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fixed AWS credentials from the environment, and nothing else botocore could find."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def verify_sigv4(
    token: str, *, host: str, region: str, service: str, secret: str
) -> dict[str, str]:
    """The token's query, after checking its signature as AWS does (Signature Version 4, query
    string): canonical request, string to sign, signing key. Raises AssertionError if wrong."""
    assert not token.startswith(("http://", "https://")), "the token carries no scheme"
    parts = urlsplit(f"//{token}")
    assert parts.hostname == host and parts.path == "/"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = dict(pairs)
    signature = query.pop("X-Amz-Signature")
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert query["X-Amz-SignedHeaders"] == "host"
    stamp = query["X-Amz-Date"]
    day = stamp[:8]
    scope = f"{day}/{region}/{service}/aws4_request"
    assert query["X-Amz-Credential"] == f"{ACCESS_KEY}/{scope}"

    def enc(text: str) -> str:
        return quote(text, safe="-_.~")

    canonical_query = "&".join(f"{enc(k)}={enc(v)}" for k, v in sorted(query.items()))
    canonical_request = "\n".join(
        ["GET", "/", canonical_query, f"host:{host}", "", "host", hashlib.sha256(b"").hexdigest()]
    )
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            stamp,
            scope,
            hashlib.sha256(canonical_request.encode()).hexdigest(),
        ]
    )
    key = _hmac(f"AWS4{secret}".encode(), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    assert hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest() == signature
    return query


def user_and_token(credentials: Credentials) -> tuple[str, str]:
    """What a token provider gives: (user, token), never a password alone."""
    assert len(credentials) == 2
    return credentials


@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize(
    ("service", "serverless"), [("elasticache", False), ("elasticache", True), ("memorydb", False)]
)
def test_the_aws_token_is_a_presigned_connect_request(service: str, serverless: bool) -> None:
    provider = AwsIamCredentials(
        "app-user", "my-cache", "eu-west-1", service=service, serverless=serverless
    )
    before = datetime.now(UTC).replace(microsecond=0)
    user, token = user_and_token(provider.get_credentials())
    after = datetime.now(UTC)
    assert user == "app-user"
    query = verify_sigv4(
        token, host="my-cache", region="eu-west-1", service=service, secret=SECRET_KEY
    )
    assert query["Action"] == "connect"
    assert query["User"] == "app-user"
    assert query["X-Amz-Expires"] == "900"
    assert ("ResourceType" in query) is serverless
    if serverless:
        assert query["ResourceType"] == "ServerlessCache"
    signed = datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert before <= signed <= after


@pytest.mark.usefixtures("aws_env")
def test_a_token_signed_with_another_secret_does_not_verify() -> None:
    # The check above can fail: it is not satisfied by any well-formed URL.
    _, token = user_and_token(AwsIamCredentials("u", "c", "us-east-1").get_credentials())
    with pytest.raises(AssertionError):
        verify_sigv4(token, host="c", region="us-east-1", service="elasticache", secret="other")


@pytest.mark.usefixtures("aws_env")
async def test_the_aws_token_is_reused_until_its_refresh_age() -> None:
    now = [1000.0]
    provider = AwsIamCredentials("u", "c", "us-east-1", clock=lambda: now[0])
    first = await provider.get_credentials_async()
    now[0] += 599
    assert await provider.get_credentials_async() == first
    assert provider.get_credentials() == first
    # A new signature carries a new X-Amz-Date: let the wall clock's second pass.
    await asyncio.sleep(1 - time.time() % 1 + 0.01)
    now[0] += 2
    renewed = user_and_token(await provider.get_credentials_async())
    assert renewed[0] == "u" and renewed != first
    verify_sigv4(renewed[1], host="c", region="us-east-1", service="elasticache", secret=SECRET_KEY)
    now[0] += 1
    assert await provider.get_credentials_async() == renewed


def _aws_settings(**redis: Any) -> Settings:
    return load_settings(
        None,
        redis={
            "credentials": "aws-iam",
            "username": f"iam-{uuid.uuid4().hex[:8]}",
            "aws_cache_name": "my-cache",
            "aws_region": "us-east-1",
            "key_prefix": f"test-{uuid.uuid4().hex[:12]}",
            **redis,
        },
    )


def _acl_user(client: sync_redis.Redis, user: str, password: str) -> None:
    client.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", user, "reset", "on", f">{password}", "~*", "&*", "+@all"
    )


async def _set_and_get(settings: Settings, target: RedisTarget) -> str | None:
    # As store_for(settings) builds it, over the target whose token the test knows: each
    # target signs its own (a new one each second).
    store = RedisStore(
        key_prefix=settings.redis.key_prefix,
        max_connections=settings.redis.max_connections,
        target=target,
        queue_shards=settings.redis.cluster_shards,
    )
    try:
        await store.set("greeting", "hello")
        return await store.get("greeting")
    finally:
        await store.close()


async def _refused(settings: Settings, target: RedisTarget) -> str:
    store = RedisStore(
        target=target,
        key_prefix=settings.redis.key_prefix,
        retries=0,
        socket_timeout=2,
    )
    try:
        # One server: StoreUnavailable; Cluster: redis-py's RedisClusterException, raised when
        # no startup node lets the client read the slot map.
        with pytest.raises((StoreUnavailable, RedisClusterException)) as caught:
            await store.set("greeting", "hello")
        return str(caught.value)
    finally:
        await store.close()


@pytest.mark.redis
@pytest.mark.usefixtures("aws_env")
async def test_the_store_logs_in_with_the_aws_token(redis_url: str) -> None:
    settings = _aws_settings(url=redis_url)
    user = settings.redis.username
    target = redis_target(settings)
    provider = target.credentials
    assert provider is not None
    # The token every connection sends for 10 min.
    _, token = user_and_token(provider().get_credentials())
    admin = sync_redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        _acl_user(admin, user, token)
        assert await _set_and_get(settings, target) == "hello"
        described = await describe_topology(target)  # what `chatgate doctor` says
        assert described.startswith(f"single {redis_url}: master, ")
        # The wrong token is refused: the user's password is no longer it.
        _acl_user(admin, user, "another-token")
        message = await _refused(settings, target)
        assert "invalid username-password pair" in message
        assert token not in message
        with pytest.raises(AuthenticationError):
            await describe_topology(target)
    finally:
        admin.execute_command("ACL", "DELUSER", user)  # type: ignore[no-untyped-call]
        admin.close()


@pytest.mark.redis
@pytest.mark.usefixtures("aws_env")
async def test_the_cluster_store_logs_in_with_the_aws_token(redis_cluster: RedisClusterSet) -> None:
    settings = _aws_settings(cluster_nodes=redis_cluster.addresses)
    user = settings.redis.username
    target = redis_target(settings)
    provider = target.credentials
    assert provider is not None
    _, token = user_and_token(provider().get_credentials())
    admins = [redis_cluster.client(s.port) for s in redis_cluster.nodes]
    try:
        for admin in admins:
            _acl_user(admin, user, token)
        assert await _set_and_get(settings, target) == "hello"
        described = await describe_topology(target)
        assert described.startswith("cluster ok, 3 master(s), 3 replica(s): master ")
        assert "unreachable" not in described
        for admin in admins:
            _acl_user(admin, user, "another-token")
        message = await _refused(settings, target)
        assert "invalid username-password pair" in message
        assert token not in message
        with pytest.raises(RedisConnectionError, match="AuthenticationError"):
            await describe_topology(target)
    finally:
        for admin in admins:
            admin.execute_command("ACL", "DELUSER", user)  # type: ignore[no-untyped-call]
            admin.close()


@pytest.mark.redis
@pytest.mark.usefixtures("aws_env")
async def test_the_sentinel_store_logs_in_with_the_aws_token(sentinel_set: SentinelSet) -> None:
    settings = _aws_settings(sentinels=sentinel_set.addresses, sentinel_master=MASTER_NAME)
    user = settings.redis.username
    target = redis_target(settings)
    provider = target.credentials
    assert provider is not None
    _, token = user_and_token(provider().get_credentials())
    # Without redis.sentinel_password the sentinels are asked with the data nodes' login too.
    admins = [sentinel_set.data_client(s.port) for s in (sentinel_set.master, sentinel_set.replica)]
    admins += [s.client() for s in sentinel_set.sentinels]
    try:
        for admin in admins:
            _acl_user(admin, user, token)
        assert await _set_and_get(settings, target) == "hello"
        described = await describe_topology(target)
        assert described.startswith(f"sentinel master {MASTER_NAME}: master ")
        assert "unreachable" not in described
        for admin in admins:
            _acl_user(admin, user, "another-token")
        message = await _refused(settings, target)
        assert token not in message
        described = await describe_topology(target)
        assert "unreachable (AuthenticationError)" in described
    finally:
        for admin in admins:
            admin.execute_command("ACL", "DELUSER", user)  # type: ignore[no-untyped-call]
            admin.close()


def _azure_settings(**redis: Any) -> Settings:
    return load_settings(
        None,
        redis={
            "url": "redis://127.0.0.1:6390/0",
            "credentials": "azure-entra",
            "azure_client_id": "11111111-2222-3333-4444-555555555555",
            "azure_tenant_id": "66666666-7777-8888-9999-000000000000",
            "azure_client_secret": "sp-secret",
            **redis,
        },
    )


def test_each_client_gets_an_entra_id_provider_for_the_service_principal() -> None:
    target = redis_target(_azure_settings())
    client = open_client(target, max_connections=2, socket_timeout=1, retries=0)
    provider = client.connection_pool.connection_kwargs["credential_provider"]
    assert isinstance(provider, EntraIdCredentials)
    assert provider.describe == (
        "service principal 11111111-2222-3333-4444-555555555555 "
        "in tenant 66666666-7777-8888-9999-000000000000"
    )
    assert "username" not in client.connection_pool.connection_kwargs
    other = open_client(target, max_connections=2, socket_timeout=1, retries=0)
    # One provider per client: redis-py re-authenticates one client's pool through it.
    assert other.connection_pool.connection_kwargs["credential_provider"] is not provider


def test_a_managed_identity_builds_redis_entraids_provider() -> None:
    # Building the managed identity's provider asks nothing of the network (only its tokens do).
    target = redis_target(_azure_settings(azure_client_secret="", azure_tenant_id=""))
    client = open_client(target, max_connections=2, socket_timeout=1, retries=0)
    provider = client.connection_pool.connection_kwargs["credential_provider"]
    assert (
        provider.describe == "user-assigned managed identity 11111111-2222-3333-4444-555555555555"
    )
    assert isinstance(provider.provider(), EntraIdCredentialsProvider)


def test_the_cluster_nodes_get_the_provider(redis_cluster: RedisClusterSet) -> None:
    settings = _azure_settings(url="", cluster_nodes=redis_cluster.addresses)
    client: Any = open_client(
        redis_target(settings), max_connections=2, socket_timeout=1, retries=0
    )
    provider = client.nodes_manager.connection_kwargs["credential_provider"]
    assert isinstance(provider, EntraIdCredentials)
    for node in client.startup_nodes:
        assert node.connection_kwargs["credential_provider"] is provider


@pytest.mark.parametrize(
    ("redis", "message"),
    [
        ({"credentials": "aws-iam", "url": "redis://h:6379"}, "needs redis.username, redis.aws"),
        (
            {"credentials": "aws-iam", "url": "redis://u:pw@h:6379", "username": "u"},
            "leave redis.password unset and the URL without user or password",
        ),
        (
            {"credentials": "azure-entra", "url": "redis://h:6379", "azure_client_secret": "s"},
            "needs redis.azure_client_id and redis.azure_tenant_id",
        ),
        (
            {"credentials": "azure-entra", "url": "redis://h:6379", "username": "u"},
            "leave redis.username unset",
        ),
        ({"credentials": "kerberos", "url": "redis://h:6379"}, "credentials"),
    ],
)
def test_missing_settings_are_named(redis: dict[str, Any], message: str) -> None:
    from gateway.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        load_settings(None, redis=redis)
    assert message in str(caught.value)


def test_the_secret_stays_out_of_the_settings_repr() -> None:
    settings = _azure_settings()
    assert "sp-secret" not in repr(settings.redis)
    assert "sp-secret" not in str(settings.model_dump())


def _entra_env(monkeypatch: pytest.MonkeyPatch, endpoint: FakeManagedIdentityEndpoint) -> None:
    for name in ("IMDS_ENDPOINT", "MSI_ENDPOINT", "MSI_SECRET", "IDENTITY_SERVER_THUMBPRINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IDENTITY_ENDPOINT", endpoint.url)
    monkeypatch.setenv("IDENTITY_HEADER", endpoint.header)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


class FakeManagedIdentityEndpoint:
    """The token endpoint Azure App Service gives a managed identity (IDENTITY_ENDPOINT and
    IDENTITY_HEADER), on 127.0.0.1, in a thread of its own: msal asks it with blocking
    requests calls. It answers with a JWT naming `oid`, signed with a key of its own (Redis
    takes the token as the user's password; nothing checks the signature here)."""

    def __init__(self, oids: list[str], header: str, lifetime: int = 3600) -> None:
        self.oids = oids  # the n-th token names the n-th (the last one from then on)
        self.lifetime = lifetime
        self.tokens: list[str] = []
        self.header = header
        self.asked: list[dict[str, str]] = []
        self.token = self.next_token()  # the first one, known in advance
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = dict(parse_qsl(urlsplit(self.path).query))
                outer.asked.append(query)
                if self.headers.get("X-IDENTITY-HEADER") != outer.header:
                    self.send_response(401)
                    self.end_headers()
                    return
                token = outer.tokens[0] if len(outer.asked) == 1 else outer.next_token()
                claims = jwt.decode(token, options={"verify_signature": False})
                body = json.dumps(
                    {
                        "access_token": token,
                        "expires_on": str(claims["exp"]),
                        "resource": query.get("resource"),
                        "token_type": "Bearer",
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/msi/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def next_token(self) -> str:
        now = int(time.time())
        oid = self.oids[min(len(self.tokens), len(self.oids) - 1)]
        claims = {"oid": oid, "iat": now, "exp": now + self.lifetime}
        self.tokens.append(jwt.encode(claims, "k" * 32, "HS256"))
        return self.tokens[-1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.redis
async def test_the_store_logs_in_with_a_managed_identitys_token(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    oid = str(uuid.uuid4())
    client_id = str(uuid.uuid4())
    endpoint = FakeManagedIdentityEndpoint([oid], header="identity-header")
    _entra_env(monkeypatch, endpoint)
    settings = _azure_settings(
        url=redis_url,
        azure_client_id=client_id,
        azure_tenant_id="",
        azure_client_secret="",
        key_prefix=f"test-{uuid.uuid4().hex[:12]}",
    )
    target = redis_target(settings)
    admin = sync_redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        _acl_user(admin, oid, endpoint.token)  # the user is the token's oid
        assert await _set_and_get(settings, target) == "hello"
        assert endpoint.asked, "the token came from the endpoint"
        assert {(q["resource"], q["client_id"]) for q in endpoint.asked} == {
            ("https://redis.azure.com", client_id)
        }
        described = await describe_topology(target)
        assert described.startswith(f"single {redis_url}: master, ")
        _acl_user(admin, oid, "another-token")
        message = await _refused(settings, target)
        assert "invalid username-password pair" in message
        assert endpoint.token not in message
    finally:
        admin.execute_command("ACL", "DELUSER", oid)  # type: ignore[no-untyped-call]
        admin.close()
        endpoint.close()


@pytest.mark.redis
async def test_open_connections_log_in_again_with_a_renewed_entra_id_token(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tokens of 6 s: redis-entraid renews at 70% of a token's life, and each new token here
    # names another user, so a connection that logged in again says so in ACL WHOAMI.
    oids = [f"oid-{n}-{uuid.uuid4().hex[:8]}" for n in range(6)]
    endpoint = FakeManagedIdentityEndpoint(oids, header="identity-header", lifetime=6)
    _entra_env(monkeypatch, endpoint)
    settings = _azure_settings(url=redis_url, azure_client_secret="", azure_tenant_id="")
    admin = sync_redis.Redis.from_url(redis_url, decode_responses=True)
    client = open_client(redis_target(settings), max_connections=1, socket_timeout=2, retries=0)
    try:
        for oid in oids:
            admin.execute_command(  # type: ignore[no-untyped-call]
                "ACL", "SETUSER", oid, "reset", "on", "nopass", "~*", "&*", "+@all"
            )
        assert await client.execute_command("ACL", "WHOAMI") == oids[0]  # type: ignore[no-untyped-call]
        whoami = oids[0]
        for _ in range(150):  # a renewal is due 4.2 s after the first token
            await asyncio.sleep(0.1)
            whoami = await client.execute_command("ACL", "WHOAMI")  # type: ignore[no-untyped-call]
            if whoami != oids[0]:
                break
        assert whoami in oids[1:], "the pooled connection was not logged in again"
    finally:
        await client.aclose()
        for oid in oids:
            admin.execute_command("ACL", "DELUSER", oid)  # type: ignore[no-untyped-call]
        admin.close()
        endpoint.close()
