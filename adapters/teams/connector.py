"""Calls to the Bot Connector at a conversation's serviceUrl, through the SDK's ConnectorClient.

Every failure leaves here as a DeliveryError: 429 and 5xx are retried (Retry-After honoured
up to `teams.max_retry_after`), a 401 fetches a new token once, a 404 on an edit is
MessageGone, anything else is permanent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import aiohttp
from microsoft_agents.activity import Activity, ResourceResponse
from microsoft_agents.hosting.core.connector.client import ConnectorClient

from adapters.teams.conversations import Conversations, trusted_service_url
from adapters.teams.token import BotToken
from gateway.sdk import DeliveryError, MessageGone

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class ConnectorRefused(DeliveryError):
    """The Bot Connector answered with an error status; `detail` is its error text."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(
            f"the Bot Connector refused the call (HTTP {status})",
            permanent=status in (400, 401, 403, 404),
        )
        self.status = status
        self.detail = detail


class TeamsConnector:
    def __init__(
        self,
        token: BotToken,
        conversations: Conversations,
        *,
        retries: int,
        max_retry_after: float,
        on_rate_limited: Callable[[], None],
    ) -> None:
        self._token = token
        self._conversations = conversations
        self._retries = retries
        self._max_retry_after = max_retry_after
        self._on_rate_limited = on_rate_limited
        self._clients: dict[str, ConnectorClient] = {}

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    async def send(self, conversation_id: str, activity: Activity) -> str:
        async def call(client: ConnectorClient) -> ResourceResponse:
            return await client.conversations.send_to_conversation(conversation_id, activity)

        response = await self._call(conversation_id, call)
        return response.id or ""

    async def update(self, conversation_id: str, activity_id: str, activity: Activity) -> None:
        async def call(client: ConnectorClient) -> ResourceResponse:
            return await client.conversations.update_activity(
                conversation_id, activity_id, activity
            )

        await self._call(conversation_id, call, edit=True)

    async def delete(self, conversation_id: str, activity_id: str) -> None:
        async def call(client: ConnectorClient) -> None:
            await client.conversations.delete_activity(conversation_id, activity_id)

        await self._call(conversation_id, call, edit=True)

    async def _call(
        self,
        conversation_id: str,
        call: Callable[[ConnectorClient], Awaitable[_T]],
        *,
        edit: bool = False,
    ) -> _T:
        where = await self._conversations.find(_base(conversation_id))
        attempt = 0
        renewed = False
        while True:
            client = await self._client(where.service_url)
            try:
                return await call(client)
            except aiohttp.ClientResponseError as exc:
                status = exc.status
                if status == 401 and not renewed:
                    self._token.forget()
                    renewed = True
                    continue
                if status == 404 and edit:
                    raise MessageGone("the Teams message is gone") from None
                if (status == 429 or status >= 500) and attempt < self._retries:
                    attempt += 1
                    delay = _retry_after(exc.headers, attempt)
                    if status == 429:
                        self._on_rate_limited()
                    if delay > self._max_retry_after:
                        raise DeliveryError(f"Teams asked to wait {delay:.0f} s") from None
                    await asyncio.sleep(delay)
                    continue
                log.warning("teams connector refused status=%s", status)
                raise ConnectorRefused(status, exc.message[:500]) from None
            except (aiohttp.ClientError, TimeoutError) as exc:
                if attempt < self._retries:
                    attempt += 1
                    await asyncio.sleep(0.5 * attempt)
                    continue
                raise DeliveryError(
                    f"cannot reach the Bot Connector ({type(exc).__name__})"
                ) from None

    async def _client(self, service_url: str) -> ConnectorClient:
        if not trusted_service_url(service_url, allow_local=self._conversations.allow_local):
            raise DeliveryError("untrusted serviceUrl", permanent=True)
        token = await self._token.get()
        client = self._clients.get(service_url)
        if client is None:
            session = aiohttp.ClientSession(
                base_url=service_url if service_url.endswith("/") else service_url + "/",
                timeout=aiohttp.ClientTimeout(total=30),
            )
            client = ConnectorClient(service_url, token, session=session)
            self._clients[service_url] = client
        client.client.headers["Authorization"] = f"Bearer {token}"
        return client


def _base(conversation_id: str) -> str:
    return conversation_id.partition(";messageid=")[0]


def _retry_after(headers: Mapping[str, str] | None, attempt: int) -> float:
    backoff: float = 0.5 * 2 ** (attempt - 1)
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else backoff
    except ValueError:
        return backoff
