"""Settings for what the agent keeps and learns: skills it writes, past conversations and
their search index, and parallel delegation to sub-agents."""

from __future__ import annotations

from pydantic import Field

from gateway.config.base import Section


class SkillsSettings(Section):
    """Skills the agent writes with skill_manage, kept in the store (tools/skills/store.py)."""

    # A new or changed skill waits for an admin's Approve (access.admins) before it is saved.
    manage_approval: bool = True
    max_skill_bytes: int = Field(default=1_000_000, ge=10_000, le=100_000_000)  # one skill
    max_file_bytes: int = Field(default=256_000, ge=1_000, le=100_000_000)  # one file
    max_files: int = Field(default=50, ge=1, le=10_000)


class HistorySettings(Section):
    """Past conversations: the search index behind session_search, and how long it keeps them."""

    # Conversations (and their index entries) untouched this long are deleted; 0 keeps them.
    retention_days: float = Field(default=90.0, ge=0, le=36_500)


class DelegationSettings(Section):
    """The delegate tool (tools/agent/delegate.py): sub-agents with their own context and limits."""

    max_parallel: int = Field(default=3, ge=1, le=16)  # tasks in one delegate call
    # 1: sub-agents cannot delegate; 2: they may, once more; and so on.
    max_depth: int = Field(default=1, ge=1, le=4)
    # prompt + completion tokens for one sub-agent task
    max_tokens_per_task: int = Field(default=200_000, ge=1000, le=1_000_000_000)
    # delegate(background=true) tasks running at once per chat; 0: background is refused.
    max_background_per_chat: int = Field(default=3, ge=0, le=100)
    # A running task's record is refreshed this often; one not refreshed for three times as
    # long belongs to a process that died, and is marked interrupted.
    background_heartbeat_seconds: float = Field(default=10.0, ge=0.2, le=600)
