"""`/model` (list and switch this conversation's model), `/profile` (what applies here and
why) and `/usage` (this chat's and the person's spending)."""

from __future__ import annotations

import time

from gateway.budgets.ledger import Spend
from gateway.budgets.limits import Limit, Who, usd
from gateway.intake.access import AccessPolicy
from gateway.llm.providers import ModelTarget, UnknownModel
from gateway.profiles.book import Resolution
from gateway.profiles.plan import TurnPlanner
from gateway.sdk.extensions import Command, CommandCall, Extensions

RESET_WORDS = ("reset", "profile")


def register_profile_commands(
    extensions: Extensions, planner: TurnPlanner, access: AccessPolicy
) -> None:
    commands = ProfileCommands(planner, access)
    for command in (
        Command("model", "list the models here, or switch: /model NUMBER | NAME", commands.model),
        Command("profile", "show the profile, models and limits that apply here", commands.profile),
        Command("usage", "show this chat's and your spending", commands.usage),
    ):
        extensions.add_command(command)


class ProfileCommands:
    def __init__(self, planner: TurnPlanner, access: AccessPolicy) -> None:
        self._planner = planner
        self._access = access

    def _resolve(self, call: CommandCall) -> Resolution:
        return self._planner.book.resolve(call.inbound.chat, call.inbound.sender)

    def _may_switch(self, call: CommandCall) -> bool:
        return self._planner.book.allow_model_switch or self._access.is_admin(call.inbound.sender)

    async def model(self, call: CommandCall) -> str:
        planner = self._planner
        resolution = self._resolve(call)
        allowed = planner.models(resolution)
        choice = await planner.choices.get(call.session)
        current = planner.chain(resolution, choice)[0]
        arg = call.args.strip()
        if not arg:
            lines = [f"Models for this conversation (profile {resolution.name}):"]
            for number, target in enumerate(allowed, 1):
                lines.append(f"{number}. {target}{' (in use)' if target == current else ''}")
            if self._may_switch(call):
                lines.append(
                    "Switch with /model NUMBER or /model provider/model; "
                    "/model reset goes back to the profile's model."
                )
            else:
                lines.append("Only an admin can switch the model here.")
            return "\n".join(lines)
        if not self._may_switch(call):
            return "Only an admin can switch the model here."
        if arg.lower() in RESET_WORDS:
            await planner.choices.clear(call.session)
            return f"Back to the profile's model: {planner.chain(resolution)[0]}."
        picked = self._pick(arg, allowed)
        if picked is None:
            listed = ", ".join(str(t) for t in allowed)
            return f"{arg!r} is not one of the models here: {listed}. Send /model to see them."
        await planner.choices.set(call.session, str(picked))
        return f"This conversation now uses {picked}."

    def _pick(self, arg: str, allowed: list[ModelTarget]) -> ModelTarget | None:
        if arg.isdigit():
            number = int(arg)
            return allowed[number - 1] if 1 <= number <= len(allowed) else None
        try:
            target = self._planner.pool.target(arg)
        except UnknownModel:
            return None
        return target if target in allowed else None

    async def profile(self, call: CommandCall) -> str:
        planner = self._planner
        resolution = self._resolve(call)
        profile = resolution.profile
        choice = await planner.choices.get(call.session)
        chain = planner.chain(resolution, choice)
        lines = [
            f"Profile: {resolution.name}, because {resolution.why}.",
            "Models, in fallback order: " + " -> ".join(str(t) for t in chain),
        ]
        if choice and str(chain[0]) == choice:
            lines.append(f"This conversation chose {choice} with /model.")
        if profile.description:
            lines.append(profile.description)
        tools = []
        if profile.toolsets is not None:
            tools.append("toolsets " + (", ".join(profile.toolsets) or "none"))
        if profile.tool_policy:
            tools.append(f"tool rule {profile.tool_policy}")
        if profile.tools.allow or profile.tools.deny:
            tools.append("its own allow/deny")
        lines.append("Tools: " + ("; ".join(tools) if tools else "what the tool policy allows"))
        limits = [
            f"{key} {value}"
            for key in (
                "temperature",
                "max_tokens",
                "max_iterations",
                "max_turn_seconds",
                "max_tokens_per_turn",
                "stream",
            )
            if (value := getattr(profile, key)) is not None
        ]
        if limits:
            lines.append("Settings: " + ", ".join(limits))
        held = [key for key in planner.breakers.open_keys() if _in_chain(key, chain)]
        if held:
            now = time.monotonic()
            parts = [
                f"{key} (tried again in {max(0, planner.breakers.retry_at(key) - now):.0f} s)"
                for key in held
            ]
            lines.append("Held out after failures: " + ", ".join(parts))
        return "\n".join(lines)

    async def usage(self, call: CommandCall) -> str:
        ledger = self._planner.ledger
        periods = ledger.periods
        inbound = call.inbound
        await ledger.flush()  # what this process still holds in memory counts too
        who = Who(inbound.sender, inbound.chat)
        day, month = periods.current("day"), periods.current("month")
        user, chat = who.ident("user") or "", who.ident("chat") or ""
        spends = await ledger.spends(
            [
                (day.id, "chat", chat),
                (day.id, "user", user),
                (month.id, "chat", chat),
                (month.id, "user", user),
            ]
        )
        limits = {(limit.dimension, limit.period): limit for limit in self._planner.gate.limits}
        exempt = not self._planner.gate.applicable(who) and bool(self._planner.gate.limits)
        lines = [f"Today (until {periods.describe_reset(day)}):"]
        lines.append("  this chat: " + _line(spends[0], limits.get(("chat", "day"))))
        lines.append("  you: " + _line(spends[1], limits.get(("user", "day"))))
        lines.append(f"This month (until {periods.describe_reset(month)}):")
        lines.append("  this chat: " + _line(spends[2], None))
        lines.append("  you: " + _line(spends[3], None))
        if exempt:
            lines.append("As an admin you are not limited by the budgets.")
        return "\n".join(lines)


def _line(spend: Spend, limit: Limit | None) -> str:
    text = f"{spend.tokens:,} tokens ({spend.tokens_in:,} in, {spend.tokens_out:,} out), "
    text += usd(spend.usd)
    if limit is not None:
        caps = []
        if limit.usd:
            caps.append(usd(limit.usd))
        if limit.tokens:
            caps.append(f"{limit.tokens:,} tokens")
        text += f" of {' / '.join(caps)} a {'day' if limit.period == 'day' else 'month'}"
    return text


def _in_chain(key: str, chain: list[ModelTarget]) -> bool:
    return any(key in (t.provider, str(t)) for t in chain)
