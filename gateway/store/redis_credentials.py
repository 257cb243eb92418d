"""Login tokens for managed Redis services, as redis-py credential providers asked on every new
connection: ElastiCache and MemoryDB IAM auth (a SigV4-presigned request, signed with botocore)
and Azure Cache for Redis with Microsoft Entra ID (redis-entraid's provider)."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from redis.credentials import CredentialProvider, StreamingCredentialProvider
from redis.exceptions import AuthenticationError

from gateway.config import ConfigError

if TYPE_CHECKING:
    from gateway.config.redis import RedisSettings

# AWS accepts a token for 15 minutes after it is signed; a new one is made after 10, so a
# connection opened near the end of a token's life never sends an expired one.
AWS_TOKEN_LIFETIME = 900
AWS_REFRESH_AFTER = 600.0
# The scope (service principal) and resource (managed identity) of Azure Cache for Redis.
AZURE_REDIS_RESOURCE = "https://redis.azure.com"

Credentials = tuple[str] | tuple[str, str]


def _extra_missing(extra: str, package: str) -> ConfigError:
    return ConfigError(
        [f"redis.credentials needs {package}, not installed: pip install 'chatgate[{extra}]'"]
    )


class AwsIamCredentials(CredentialProvider):
    """The IAM-enabled `user` and a token for it: the presigned URL of
    `GET http://<cache_name>/?Action=connect&User=<user>` without its scheme, signed with the
    AWS credentials botocore finds (environment, profile, instance or task role). A token is
    reused until `refresh_after` seconds of `clock` have passed."""

    def __init__(
        self,
        user: str,
        cache_name: str,
        region: str,
        *,
        service: str = "elasticache",
        serverless: bool = False,
        clock: Callable[[], float] = time.monotonic,
        refresh_after: float = AWS_REFRESH_AFTER,
    ) -> None:
        _import_botocore()  # a missing extra is reported when the store is built, not later
        self.user = user
        self.cache_name = cache_name
        self.region = region
        self.service = service
        self.serverless = serverless
        self._clock = clock
        self._refresh_after = refresh_after
        self._signer: Any = None
        self._lock = threading.Lock()
        self._token = ""
        self._made = -math.inf

    def _fresh(self) -> bool:
        return bool(self._token) and self._clock() - self._made < self._refresh_after

    def get_credentials(self) -> Credentials:
        with self._lock:
            if not self._fresh():
                self._token = self._sign()
                self._made = self._clock()
            return self.user, self._token

    async def get_credentials_async(self) -> Credentials:
        if self._fresh():
            return self.user, self._token
        # Finding the credentials may ask the instance metadata service (HTTP): not on the loop.
        return await asyncio.to_thread(self.get_credentials)

    def _sign(self) -> str:
        if self._signer is None:
            self._signer = _request_signer(self.service, self.region)
        query = {"Action": "connect", "User": self.user}
        if self.serverless:
            query["ResourceType"] = "ServerlessCache"
        request = {
            "method": "GET",
            "url": f"http://{self.cache_name}/?{urlencode(query)}",
            "body": {},
            "headers": {},
            "context": {},
        }
        url: str = self._signer.generate_presigned_url(
            request,
            operation_name="connect",
            expires_in=AWS_TOKEN_LIFETIME,
            region_name=self.region,
        )
        return url.removeprefix("http://")


def _import_botocore() -> Any:
    try:
        import botocore.session
    except ImportError as exc:
        raise _extra_missing("aws", "botocore") from exc
    return botocore.session


def _request_signer(service: str, region: str) -> Any:
    from botocore.model import ServiceId
    from botocore.signers import RequestSigner

    session = _import_botocore().get_session()
    credentials = session.get_credentials()
    if credentials is None:
        raise AuthenticationError(
            "redis.credentials = aws-iam found no AWS credentials: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, a profile, or give the instance or task an IAM role"
        )
    events = session.get_component("event_emitter")
    return RequestSigner(ServiceId(service), region, service, "v4", credentials, events)


class EntraIdCredentials(StreamingCredentialProvider):
    """redis-entraid's provider, built on first use: building it asks Entra ID for the tenant's
    endpoints (HTTP), which neither startup nor the event loop should wait for. Streaming: the
    clients it is given to re-authenticate their open connections with each new token."""

    def __init__(self, build: Callable[[], StreamingCredentialProvider], describe: str) -> None:
        self._build = build
        self.describe = describe  # which identity, for messages (no secret)
        self._provider: StreamingCredentialProvider | None = None
        self._lock = threading.Lock()
        self._on_next: Any = None
        self._on_error: Any = None

    def provider(self) -> StreamingCredentialProvider:
        with self._lock:
            if self._provider is None:
                built = self._build()
                if self._on_next is not None:
                    built.on_next(self._on_next)
                if self._on_error is not None:
                    built.on_error(self._on_error)
                self._provider = built
            return self._provider

    def get_credentials(self) -> Credentials:
        found: Credentials = self.provider().get_credentials()
        return found

    async def get_credentials_async(self) -> Credentials:
        provider = self._provider
        if provider is None:
            provider = await asyncio.to_thread(self.provider)
        found: Credentials = await provider.get_credentials_async()
        return found

    def on_next(self, callback: Callable[[Any], None]) -> None:
        self._on_next = callback
        if self._provider is not None:
            self._provider.on_next(callback)

    def on_error(self, callback: Callable[[Exception], None]) -> None:
        self._on_error = callback
        if self._provider is not None:
            self._provider.on_error(callback)

    def is_streaming(self) -> bool:
        return self._provider is not None and bool(self._provider.is_streaming())


def entra_id_credentials(
    client_id: str = "", tenant_id: str = "", client_secret: str = ""
) -> EntraIdCredentials:
    """A service principal when `client_secret` is given; else the managed identity
    (user-assigned when `client_id` is given, else the system-assigned one)."""
    try:
        from redis_entraid import cred_provider, identity_provider
    except ImportError as exc:
        raise _extra_missing("azure", "redis-entraid") from exc

    if client_secret:

        def build() -> StreamingCredentialProvider:
            built: StreamingCredentialProvider = cred_provider.create_from_service_principal(
                client_id=client_id,
                client_credential=client_secret,
                tenant_id=tenant_id,
                scopes=[f"{AZURE_REDIS_RESOURCE}/.default"],
            )
            return built

        return EntraIdCredentials(build, f"service principal {client_id} in tenant {tenant_id}")

    def build_managed() -> StreamingCredentialProvider:
        kinds = identity_provider.ManagedIdentityType
        built: StreamingCredentialProvider
        if client_id:
            built = cred_provider.create_from_managed_identity(
                identity_type=kinds.USER_ASSIGNED,
                resource=AZURE_REDIS_RESOURCE,
                id_type=identity_provider.ManagedIdentityIdType.CLIENT_ID,
                id_value=client_id,
            )
        else:
            built = cred_provider.create_from_managed_identity(
                identity_type=kinds.SYSTEM_ASSIGNED, resource=AZURE_REDIS_RESOURCE
            )
        return built

    which = f"user-assigned managed identity {client_id}" if client_id else "managed identity"
    return EntraIdCredentials(build_managed, which)


def credentials_for(conf: RedisSettings) -> Callable[[], CredentialProvider] | None:
    """What makes each client's provider for `redis.credentials`, or None for a password.
    AWS tokens are shared by every client; an Entra ID provider is made per client, since
    redis-py re-authenticates one client's connections through a streaming provider."""
    if conf.credentials == "aws-iam":
        aws = AwsIamCredentials(
            conf.username,
            conf.aws_cache_name,
            conf.aws_region,
            service=conf.aws_service,
            serverless=conf.aws_serverless,
        )
        return lambda: aws
    if conf.credentials == "azure-entra":
        secret = conf.azure_client_secret.get_secret_value()
        entra_id_credentials(conf.azure_client_id, conf.azure_tenant_id, secret)  # extra present?
        return lambda: entra_id_credentials(conf.azure_client_id, conf.azure_tenant_id, secret)
    return None
