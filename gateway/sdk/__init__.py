"""The one surface plugins (adapters/ and tools/) import from the core.

Everything a platform or a tool family needs is named here once, in `__all__`; an import-linter
contract refuses any other core import from a plugin. Names load on first use, so a plugin that
needs `Inbound` does not pull in the scheduler or the model client. Two kits that only some
plugins use have modules of their own: `gateway.sdk.media` (downloads, sniffing, images, media
services) and `gateway.sdk.webkit` (the console's page, sign-in and transcript machinery that
the web chat and the API reuse).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import gateway

if TYPE_CHECKING:
    from gateway.approvals import untrusted as untrusted
    from gateway.approvals.records import ApprovalChoice as ApprovalChoice
    from gateway.approvals.rendezvous import Rendezvous as Rendezvous
    from gateway.approvals.seals import EntrySigner as EntrySigner
    from gateway.config import DAY as DAY
    from gateway.config import GB as GB
    from gateway.config import HOUR as HOUR
    from gateway.config import MINUTE as MINUTE
    from gateway.config import WEEK as WEEK
    from gateway.config import BrowserSettings as BrowserSettings
    from gateway.config import ConfigError as ConfigError
    from gateway.config import DockerTerminalSettings as DockerTerminalSettings
    from gateway.config import MCPServerSettings as MCPServerSettings
    from gateway.config import MCPSettings as MCPSettings
    from gateway.config import ProfileSettings as ProfileSettings
    from gateway.config import ProfilesSettings as ProfilesSettings
    from gateway.config import Section as Section
    from gateway.config import Settings as Settings
    from gateway.config import SkillsSettings as SkillsSettings
    from gateway.config import SSHTerminalSettings as SSHTerminalSettings
    from gateway.config import ToolRule as ToolRule
    from gateway.config import ToolsSettings as ToolsSettings
    from gateway.config import config_path as config_path
    from gateway.config import config_secrets_files as config_secrets_files
    from gateway.config import started_config as started_config
    from gateway.config.urls import HttpURL as HttpURL
    from gateway.config.urls import WebSocketURL as WebSocketURL
    from gateway.intake.access import NOT_ALLOWED as NOT_ALLOWED
    from gateway.intake.access import RATE_LIMITED as RATE_LIMITED
    from gateway.intake.admission import Admission as Admission
    from gateway.intake.admission import Middleware as Middleware
    from gateway.intake.admission import Next as Next
    from gateway.intake.admission import Status as Status
    from gateway.intake.admission import Submission as Submission
    from gateway.intake.admission import finished as finished
    from gateway.intake.received import ReceivedJournal as ReceivedJournal
    from gateway.llm.client import LLMClient as LLMClient
    from gateway.llm.errors import LLMError as LLMError
    from gateway.llm.images import image_part as image_part
    from gateway.llm.images import text_part as text_part
    from gateway.runtime.backoff import FULL_JITTER as FULL_JITTER
    from gateway.runtime.backoff import SPREAD as SPREAD
    from gateway.runtime.backoff import Backoff as Backoff
    from gateway.runtime.faults import crash_point as crash_point
    from gateway.runtime.http import Handler as Handler
    from gateway.runtime.http import HttpServer as HttpServer
    from gateway.runtime.leader import LeaderElection as LeaderElection
    from gateway.runtime.logs import setup_logging as setup_logging
    from gateway.runtime.secrets import secret_values as secret_values
    from gateway.runtime.tasks import stop_task as stop_task
    from gateway.runtime.tasks import stop_tasks as stop_tasks
    from gateway.scheduling.jobs import JobKind as JobKind
    from gateway.scheduling.jobs import JobSpec as JobSpec
    from gateway.scheduling.jobs import describe_job as describe_job
    from gateway.scheduling.scheduler import JobError as JobError
    from gateway.scheduling.scheduler import Scheduler as Scheduler
    from gateway.scheduling.targets import DeliveryTargets as DeliveryTargets
    from gateway.scheduling.targets import TargetError as TargetError
    from gateway.scheduling.times import local_time as local_time
    from gateway.sdk.callbacks import CallbackData as CallbackData
    from gateway.sdk.callbacks import prefix_of as prefix_of
    from gateway.sdk.channels import Adapter as Adapter
    from gateway.sdk.channels import AdapterContext as AdapterContext
    from gateway.sdk.channels import AttachmentError as AttachmentError
    from gateway.sdk.channels import AttachmentTooLarge as AttachmentTooLarge
    from gateway.sdk.channels import AttachmentUnavailable as AttachmentUnavailable
    from gateway.sdk.channels import Capabilities as Capabilities
    from gateway.sdk.channels import DeliveryError as DeliveryError
    from gateway.sdk.channels import HandlePress as HandlePress
    from gateway.sdk.channels import MessageGone as MessageGone
    from gateway.sdk.channels import Outbox as Outbox
    from gateway.sdk.channels import StreamSupport as StreamSupport
    from gateway.sdk.checks import CheckResult as CheckResult
    from gateway.sdk.checks import probe_api as probe_api
    from gateway.sdk.extensions import EXPIRED_BUTTON as EXPIRED_BUTTON
    from gateway.sdk.extensions import AccessRule as AccessRule
    from gateway.sdk.extensions import Command as Command
    from gateway.sdk.extensions import CommandCall as CommandCall
    from gateway.sdk.extensions import Extensions as Extensions
    from gateway.sdk.families import ToolFamily as ToolFamily
    from gateway.sdk.families import ToolSource as ToolSource
    from gateway.sdk.json_body import parse_json as parse_json
    from gateway.sdk.json_body import too_deep as too_deep
    from gateway.sdk.messages import Attachment as Attachment
    from gateway.sdk.messages import AttachmentKind as AttachmentKind
    from gateway.sdk.messages import Button as Button
    from gateway.sdk.messages import ButtonPress as ButtonPress
    from gateway.sdk.messages import ButtonStyle as ButtonStyle
    from gateway.sdk.messages import ChatKind as ChatKind
    from gateway.sdk.messages import ChatRef as ChatRef
    from gateway.sdk.messages import Inbound as Inbound
    from gateway.sdk.messages import InboundKind as InboundKind
    from gateway.sdk.messages import Outbound as Outbound
    from gateway.sdk.messages import OutboundFile as OutboundFile
    from gateway.sdk.messages import PressReply as PressReply
    from gateway.sdk.messages import SentRef as SentRef
    from gateway.sdk.messages import UserRef as UserRef
    from gateway.sdk.outcome import TurnOutcome as TurnOutcome
    from gateway.sdk.platforms import PlatformPlugin as PlatformPlugin
    from gateway.sdk.platforms import PlatformUnavailable as PlatformUnavailable
    from gateway.sdk.tooling import ApprovalGate as ApprovalGate
    from gateway.sdk.tooling import ApprovalNeed as ApprovalNeed
    from gateway.sdk.tooling import SpunOff as SpunOff
    from gateway.sdk.tooling import ToolCatalog as ToolCatalog
    from gateway.sdk.tooling import ToolContext as ToolContext
    from gateway.sdk.tooling import ToolError as ToolError
    from gateway.sdk.tooling import ToolScope as ToolScope
    from gateway.sdk.tooling import ToolSpec as ToolSpec
    from gateway.sessions.history import SessionStore as SessionStore
    from gateway.sessions.key import SessionKey as SessionKey
    from gateway.store import StoreLocked as StoreLocked
    from gateway.store import keys as keys
    from gateway.store import open_store as open_store
    from gateway.store.base import Batch as Batch
    from gateway.store.base import Store as Store
    from gateway.store.base import StoreUnavailable as StoreUnavailable
    from gateway.store.search import SearchDoc as SearchDoc
    from gateway.store.search import query_terms as query_terms
    from gateway.streaming.progress import inline_code as inline_code
    from gateway.streaming.protocol import ProgressLine as ProgressLine
    from gateway.streaming.protocol import StreamFrame as StreamFrame
    from gateway.streaming.protocol import StreamRefused as StreamRefused
    from gateway.streaming.protocol import StreamThrottled as StreamThrottled
    from gateway.streaming.textsplit import split_text as split_text
    from gateway.turn.agent import Agent as Agent
    from gateway.turn.agent import TurnTimeout as TurnTimeout
    from gateway.turn.agent import execute_tool as execute_tool
    from gateway.turn.memory import MemoryBook as MemoryBook
    from gateway.turn.memory import MemoryEditError as MemoryEditError
    from gateway.turn.memory import MemoryScope as MemoryScope
    from gateway.turn.toolbox import Toolbox as Toolbox

# The directories of the core's code, for tools that keep commands away from it.
CORE_PACKAGE_DIRS: tuple[str, ...] = tuple(gateway.__path__)

_EXPORTS: dict[str, str] = {
    "crash_point": "gateway.runtime.faults",
    "stop_task": "gateway.runtime.tasks",
    "stop_tasks": "gateway.runtime.tasks",
    "too_deep": "gateway.sdk.json_body",
    "parse_json": "gateway.sdk.json_body",
    # Messages and platforms
    "CallbackData": "gateway.sdk.callbacks",
    "prefix_of": "gateway.sdk.callbacks",
    "Adapter": "gateway.sdk.channels",
    "AdapterContext": "gateway.sdk.channels",
    "AttachmentError": "gateway.sdk.channels",
    "AttachmentTooLarge": "gateway.sdk.channels",
    "AttachmentUnavailable": "gateway.sdk.channels",
    "Capabilities": "gateway.sdk.channels",
    "DeliveryError": "gateway.sdk.channels",
    "HandlePress": "gateway.sdk.channels",
    "MessageGone": "gateway.sdk.channels",
    "Outbox": "gateway.sdk.channels",
    "StreamSupport": "gateway.sdk.channels",
    "CheckResult": "gateway.sdk.checks",
    "probe_api": "gateway.sdk.checks",
    "AccessRule": "gateway.sdk.extensions",
    "Command": "gateway.sdk.extensions",
    "CommandCall": "gateway.sdk.extensions",
    "EXPIRED_BUTTON": "gateway.sdk.extensions",
    "Extensions": "gateway.sdk.extensions",
    "Attachment": "gateway.sdk.messages",
    "AttachmentKind": "gateway.sdk.messages",
    "Button": "gateway.sdk.messages",
    "ButtonPress": "gateway.sdk.messages",
    "ButtonStyle": "gateway.sdk.messages",
    "ChatKind": "gateway.sdk.messages",
    "ChatRef": "gateway.sdk.messages",
    "Inbound": "gateway.sdk.messages",
    "ReceivedJournal": "gateway.intake.received",
    "InboundKind": "gateway.sdk.messages",
    "Outbound": "gateway.sdk.messages",
    "OutboundFile": "gateway.sdk.messages",
    "PressReply": "gateway.sdk.messages",
    "SentRef": "gateway.sdk.messages",
    "UserRef": "gateway.sdk.messages",
    "TurnOutcome": "gateway.sdk.outcome",
    "PlatformPlugin": "gateway.sdk.platforms",
    "PlatformUnavailable": "gateway.sdk.platforms",
    "ToolFamily": "gateway.sdk.families",
    "ToolSource": "gateway.sdk.families",
    "ApprovalGate": "gateway.sdk.tooling",
    "ApprovalNeed": "gateway.sdk.tooling",
    "ToolCatalog": "gateway.sdk.tooling",
    "ToolContext": "gateway.sdk.tooling",
    "ToolError": "gateway.sdk.tooling",
    "SpunOff": "gateway.sdk.tooling",
    "ToolScope": "gateway.sdk.tooling",
    "ToolSpec": "gateway.sdk.tooling",
    # Settings
    "BrowserSettings": "gateway.config",
    "config_path": "gateway.config",
    "started_config": "gateway.config",
    "config_secrets_files": "gateway.config",
    "ConfigError": "gateway.config",
    "DAY": "gateway.config",
    "DockerTerminalSettings": "gateway.config",
    "GB": "gateway.config",
    "HOUR": "gateway.config",
    "MCPServerSettings": "gateway.config",
    "MCPSettings": "gateway.config",
    "MINUTE": "gateway.config",
    "ProfileSettings": "gateway.config",
    "ProfilesSettings": "gateway.config",
    "Section": "gateway.config",
    "Settings": "gateway.config",
    "SkillsSettings": "gateway.config",
    "SSHTerminalSettings": "gateway.config",
    "ToolRule": "gateway.config",
    "ToolsSettings": "gateway.config",
    "WEEK": "gateway.config",
    "HttpURL": "gateway.config.urls",
    "WebSocketURL": "gateway.config.urls",
    # The store
    "open_store": "gateway.store",
    "StoreLocked": "gateway.store",
    "Batch": "gateway.store.base",
    "Store": "gateway.store.base",
    "StoreUnavailable": "gateway.store.base",
    "keys": "gateway.store.keys",
    "query_terms": "gateway.store.search",
    "SearchDoc": "gateway.store.search",
    # Intake
    "NOT_ALLOWED": "gateway.intake.access",
    "RATE_LIMITED": "gateway.intake.access",
    "Admission": "gateway.intake.admission",
    "finished": "gateway.intake.admission",
    "Middleware": "gateway.intake.admission",
    "Next": "gateway.intake.admission",
    "Status": "gateway.intake.admission",
    "Submission": "gateway.intake.admission",
    # Sessions and turns
    "SessionStore": "gateway.sessions.history",
    "SessionKey": "gateway.sessions.key",
    "Agent": "gateway.turn.agent",
    "execute_tool": "gateway.turn.agent",
    "TurnTimeout": "gateway.turn.agent",
    "MemoryBook": "gateway.turn.memory",
    "MemoryEditError": "gateway.turn.memory",
    "MemoryScope": "gateway.turn.memory",
    "Toolbox": "gateway.turn.toolbox",
    # Approvals and outside content
    "ApprovalChoice": "gateway.approvals.records",
    "Rendezvous": "gateway.approvals.rendezvous",
    "EntrySigner": "gateway.approvals.seals",
    "untrusted": "gateway.approvals.untrusted",
    # The model
    "LLMClient": "gateway.llm.client",
    "LLMError": "gateway.llm.errors",
    "image_part": "gateway.llm.images",
    "text_part": "gateway.llm.images",
    # Scheduling
    "describe_job": "gateway.scheduling.jobs",
    "JobKind": "gateway.scheduling.jobs",
    "JobSpec": "gateway.scheduling.jobs",
    "JobError": "gateway.scheduling.scheduler",
    "Scheduler": "gateway.scheduling.scheduler",
    "DeliveryTargets": "gateway.scheduling.targets",
    "TargetError": "gateway.scheduling.targets",
    "local_time": "gateway.scheduling.times",
    # Streaming replies
    "inline_code": "gateway.streaming.progress",
    "ProgressLine": "gateway.streaming.protocol",
    "StreamFrame": "gateway.streaming.protocol",
    "StreamRefused": "gateway.streaming.protocol",
    "StreamThrottled": "gateway.streaming.protocol",
    "split_text": "gateway.streaming.textsplit",
    # Runtime
    "Backoff": "gateway.runtime.backoff",
    "FULL_JITTER": "gateway.runtime.backoff",
    "SPREAD": "gateway.runtime.backoff",
    "Handler": "gateway.runtime.http",
    "HttpServer": "gateway.runtime.http",
    "LeaderElection": "gateway.runtime.leader",
    "setup_logging": "gateway.runtime.logs",
    "secret_values": "gateway.runtime.secrets",
}

__all__ = ["CORE_PACKAGE_DIRS", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gateway.sdk' has no attribute {name!r}")
    if name in ("keys", "untrusted"):
        value: Any = importlib.import_module(module)
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
