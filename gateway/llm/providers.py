"""The configured providers and their models: `[llm]` is the provider "default", each
`[llm.providers.<name>]` another. One `LLMClient` per provider and model, built on first use
and shared by every turn."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import DEFAULT_PROVIDER, LLMSettings, ProviderSettings
from gateway.config.profiles import split_model_ref
from gateway.llm.client import LLMClient
from gateway.llm.types import Usage


@dataclass(frozen=True, order=True)
class ModelTarget:
    """One model on one provider, written `provider/model` (the model may hold slashes)."""

    provider: str
    model: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"


@dataclass(frozen=True)
class ModelInfo:
    """What the gateway knows about a model: its settings, prices and abilities."""

    target: ModelTarget
    settings: ProviderSettings  # the provider's, for this model
    policy_name: str  # the provider's name in the tool policy (`tools.providers`)

    def cost(self, usage: Usage) -> float:
        """USD for this usage at the configured prices."""
        s = self.settings
        return (
            usage.prompt_tokens * s.price_in_per_mtok
            + usage.completion_tokens * s.price_out_per_mtok
        ) / 1_000_000


class UnknownModel(ValueError):
    """A model reference names no configured provider."""


class ProviderPool:
    """Clients for every provider and model a turn may use; close with `aclose()`."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        default_client: LLMClient | None = None,
    ) -> None:
        self._settings = settings
        self._clients: dict[ModelTarget, LLMClient] = {}
        self._infos: dict[ModelTarget, ModelInfo] = {}
        if default_client is not None:
            self._clients[self.default] = default_client

    @property
    def settings(self) -> LLMSettings:
        return self._settings

    @property
    def default(self) -> ModelTarget:
        return ModelTarget(DEFAULT_PROVIDER, self._settings.model)

    @property
    def names(self) -> list[str]:
        return self._settings.provider_names

    def target(self, ref: str, model: str = "") -> ModelTarget:
        """The model a reference means: "provider" (its default model), "provider/model", or
        a provider name with `model` given apart. Raises UnknownModel."""
        provider, in_ref = split_model_ref(ref or DEFAULT_PROVIDER)
        try:
            settings = self._settings.provider_settings(provider)
        except KeyError:
            known = ", ".join(self.names)
            raise UnknownModel(f"no provider named {provider!r} (providers: {known})") from None
        return ModelTarget(provider, in_ref or model or settings.model)

    def info(self, target: ModelTarget) -> ModelInfo:
        found = self._infos.get(target)
        if found is None:
            base = self._settings.provider_settings(target.provider)
            policy = (
                base.provider_name
                if target.provider == DEFAULT_PROVIDER
                else base.provider or target.provider
            )
            found = ModelInfo(target, base.for_model(target.model), policy)
            self._infos[target] = found
        return found

    def client(self, target: ModelTarget) -> LLMClient:
        found = self._clients.get(target)
        if found is None:
            found = LLMClient(self.info(target).settings)
            self._clients[target] = found
        return found

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()
