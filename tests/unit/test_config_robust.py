"""Config robustness: misspelt CHATGATE_* names, bad JSON in env, bad URLs, absurd numbers,
secrets in headers and an unusable workspace, each one clear line (exit 2 from the CLI)."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import annotated_types
import pytest
from pydantic import BaseModel

from adapters.registry import settings_sections
from gateway import config
from gateway.app.app import App, load_settings
from gateway.app.cli import main
from gateway.config import ConfigError, settings_model
from gateway.runtime.secrets import secret_values


def problems(monkeypatch: pytest.MonkeyPatch, **env: str) -> list[str]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as err:
        load_settings(None)
    return err.value.problems


@pytest.mark.parametrize(
    ("name", "nearest"),
    [
        ("CHATGATE_TELEGRM__TOKEN", "CHATGATE_TELEGRAM__TOKEN"),
        ("CHATGATE_LOGLEVEL", "CHATGATE_LOG_LEVEL"),
        ("CHATGATE_LLM__MODLE", "CHATGATE_LLM__MODEL"),
        ("chatgate_slack__bottoken", "CHATGATE_SLACK__BOT_TOKEN"),
        ("CHATGATE_TOOLS__TERMINAL__SSH__HOTS", "CHATGATE_TOOLS__TERMINAL__SSH__HOST"),
        # Below a table the key is free, and the suggestion keeps it.
        ("CHATGATE_MCP__SERVERS__GH__COMAND", "CHATGATE_MCP__SERVERS__GH__COMMAND"),
        ("CHATGATE_LLM__MODEL__NAME", "CHATGATE_LLM__MODEL"),  # a plain value has no keys
    ],
)
def test_a_misspelt_env_name_is_an_error_naming_the_nearest(
    monkeypatch: pytest.MonkeyPatch, name: str, nearest: str
) -> None:
    assert problems(monkeypatch, **{name: "1"}) == [
        f"{name}: no such setting; did you mean {nearest}?"
    ]


def test_valid_env_names_of_every_kind_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "CHATGATE_DATA_DIR": str(tmp_path),
        "CHATGATE_CONFIG": str(tmp_path / "none.toml"),  # the file's path, not a setting
        "CHATGATE_RPC_TOKEN": "x",  # execute_code's, in its scripts' environment
        "CHATGATE_LLM__EXTRA_HEADERS__X_TITLE": "chatgate",
        "CHATGATE_MCP__SERVERS__NOTES__URL": "http://127.0.0.1:9/mcp",
        "CHATGATE_TOOLS__PROVIDERS__OPENROUTER__DENY": '["shell"]',
        "CHATGATE_SESSIONS__PER_PLATFORM__SLACK": "thread",
        "CHATGATE_ACCESS": '{"admins": ["telegram:1"]}',
        "chatgate_llm__model": "lower-case",
        "NOT_CHATGATE_ANYTHING": "x",
        "CHATGATEWAY": "x",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("CHATGATE_CONFIG")  # the file must exist when named
    settings = load_settings(None)
    assert settings.llm.model == "lower-case"
    assert settings.access.admins == ["telegram:1"]
    assert settings.mcp.servers["notes"].url == "http://127.0.0.1:9/mcp"
    assert settings.tools.providers["openrouter"].deny == ["shell"]


def test_names_are_checked_only_against_the_whole_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATGATE_TELEGRAM__TOKEN", "1:x")
    # The core alone has no [telegram]: that is not a misspelling.
    assert config.load_settings(None).llm.model
    assert load_settings(None).telegram.token is not None  # type: ignore[attr-defined]


def test_a_misspelt_name_is_listed_with_the_other_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHATGATE_LLM__MODLE", "x")
    monkeypatch.setenv("CHATGATE_LLM__TOOL_CALL_FORMAT", "xml")
    cfg = tmp_path / "c.toml"
    cfg.write_text("[router]\nbusy_mode = 'panic'\n")
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    found = err.value.problems
    assert len(found) == 3  # pydantic's own "llm.modle: unknown setting" is not repeated
    assert found[0].startswith("CHATGATE_LLM__MODLE: no such setting")
    assert any(p.startswith("llm.tool_call_format:") for p in found)
    assert any(p.startswith("router.busy_mode:") for p in found)


@pytest.mark.parametrize(
    ("name", "value", "example"),
    [
        ("CHATGATE_ACCESS__ADMINS", "[x", '["a", "b"]'),
        ("CHATGATE_LLM__EXTRA_HEADERS", "{'a': 1}", '{"key": "value"}'),
        ("CHATGATE_LLM", "{model: x}", '{"name": value}'),
        ("CHATGATE_MCP__SERVERS", '{"gh": ', '{"key": "value"}'),
    ],
)
def test_bad_json_in_env_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, example: str
) -> None:
    [line] = problems(monkeypatch, **{name: value})
    assert line.startswith(f"{name}: not valid JSON (") and line.endswith(example)
    assert value not in line  # values are never echoed: they may be secrets


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis://localhost:99999/0", "the port must be a number from 1 to 65535"),
        ("redis://localhost:abc/0", "the port must be a number from 1 to 65535"),
        ("redis://localhost:0/0", "the port must be a number from 1 to 65535"),
        ("redis://:6379/0", "needs a host name"),
        ("redis://[::1/0", "not a valid URL"),
        ("redis://localhost:6379/zero", "the path is the database number"),
        ("redis://localhost/0?socket_timeout=soon", "Invalid value for 'socket_timeout'"),
        ("unix://", "unix:// needs the socket's path"),
        (
            "rediss://localhost/0?ssl_ca_certs=/etc/chatgate/no-such-ca.pem",
            "ssl_ca_certs does not point to a file (got '/etc/chatgate/no-such-ca.pem')",
        ),
        (f"rediss://localhost/0?ssl_ca_certs={__file__}&ssl_certfile=/no/cert.pem", "ssl_certfile"),
        (f"rediss://localhost/0?ssl_ca_path={__file__}", "ssl_ca_path is not a folder"),
        (
            f"redis://localhost/0?ssl_ca_certs={__file__}",
            "ssl_ca_certs applies to TLS: the URL must start with rediss://",
        ),
    ],
)
def test_a_redis_url_that_cannot_work_is_refused(
    monkeypatch: pytest.MonkeyPatch, url: str, why: str
) -> None:
    [line] = problems(monkeypatch, CHATGATE_REDIS__URL=url)
    assert line.startswith("redis.url: ") and why in line


def test_a_refused_redis_url_does_not_show_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    [line] = problems(monkeypatch, CHATGATE_REDIS__URL="redis://:hunter22@localhost:99999/0")
    assert "hunter22" not in line and "redis://:****@localhost:99999/0" in line


def test_good_redis_urls_pass() -> None:
    folder = Path(__file__).parent
    for url in (
        "redis://localhost:6379/0",
        "rediss://u:p@[::1]:6380",
        "unix:///run/r.sock?db=2",
        f"rediss://localhost/0?ssl_ca_certs={__file__}&ssl_ca_path={folder}",
    ):
        assert load_settings(None, redis={"url": url}).redis.url == url


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("llm.base_url", "http://[::1/v1"),
        ("llm.base_url", "http://llm:123456/v1"),
        ("telegram.api_url", "http://"),
        ("discord.gateway_url", "https://gateway.discord.gg"),
        ("tools.web_search_url", "searx.lan"),
    ],
)
def test_other_urls_are_checked_too(setting: str, value: str) -> None:
    section, key = setting.split(".")
    with pytest.raises(ConfigError) as err:
        load_settings(None, **{section: {key: value}})
    assert err.value.problems[0].startswith(f"{setting}: ")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CHATGATE_APPROVALS__TIMEOUT_SECONDS", "1e12"),
        ("CHATGATE_APPROVALS__TIMEOUT_SECONDS", "inf"),
        ("CHATGATE_LLM__TIMEOUT", "86400000"),
        ("CHATGATE_ROUTER__DEDUPE_TTL", "1e30"),
        ("CHATGATE_TELEGRAM__POLL_TIMEOUT", "100000"),
        ("CHATGATE_LLM__TEMPERATURE", "7"),
    ],
)
def test_absurd_numbers_are_refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    [line] = problems(monkeypatch, **{name: value})
    key = name.removeprefix("CHATGATE_").lower().replace("__", ".")
    assert line.startswith(f"{key}: Input should be less than")


def _numbers_without_an_upper_bound(model: type[BaseModel], path: str = "") -> Iterator[str]:
    for name, field in model.model_fields.items():
        annotation: Any = field.annotation
        is_union = get_origin(annotation) in (Union, types.UnionType)
        for kind in get_args(annotation) if is_union else (annotation,):
            if get_origin(kind) is dict:
                kind = get_args(kind)[1]
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from _numbers_without_an_upper_bound(kind, f"{path}{name}.")
            elif kind in (int, float):
                bounds = (annotated_types.Le, annotated_types.Lt)
                if not any(isinstance(m, bounds) for m in field.metadata):
                    yield f"{path}{name}"


def test_every_number_in_the_settings_has_an_upper_bound() -> None:
    assert list(_numbers_without_an_upper_bound(settings_model(settings_sections()))) == []


def test_extra_headers_are_secrets_masked_and_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CHATGATE_LLM__EXTRA_HEADERS", '{"X-Gateway-Key": "gw-key-0123456789"}')
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert "gw-key-0123456789" not in out and '"X-Gateway-Key": "********"' in out
    assert "gw-key-0123456789" in secret_values(load_settings(None))


def test_an_unusable_workspace_is_one_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CHATGATE_TOOLS__WORKSPACE", str(blocker / "workspace"))
    assert main(["config", "check"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"config error: tools.workspace: cannot use {blocker}/workspace (")
    with pytest.raises(ConfigError, match="CHATGATE_TOOLS__WORKSPACE"):
        App(load_settings(None))


def test_an_unusable_data_dir_is_one_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(blocker / "data"))
    monkeypatch.setenv("CHATGATE_TOOLS__WORKSPACE", str(tmp_path / "workspace"))
    assert main(["config", "check"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        f"config error: data_dir: cannot use {blocker}/data (Not a directory); set data_dir "
        "(CHATGATE_DATA_DIR) to a directory chatgate may create and write"
    )
    with pytest.raises(ConfigError, match="CHATGATE_DATA_DIR"):
        App(load_settings(None))
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path / "data"))
    assert main(["config", "check"]) == 0
    assert (tmp_path / "data").is_dir()


def test_sentinels_from_env_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.store import redis_target

    monkeypatch.setenv("CHATGATE_REDIS__SENTINELS", '["10.0.0.5:26379", "[::1]:26380"]')
    monkeypatch.setenv("CHATGATE_REDIS__SENTINEL_MASTER", "main")
    monkeypatch.setenv("CHATGATE_REDIS__PASSWORD", "hunter22")
    monkeypatch.setenv("CHATGATE_REDIS__SENTINEL_USERNAME", "watcher")
    monkeypatch.setenv("CHATGATE_REDIS__SENTINEL_PASSWORD", "watch-pw")
    settings = load_settings(None)
    assert settings.redis.enabled
    target = redis_target(settings)
    assert target.mode == "sentinel"
    assert target.sentinels == ("10.0.0.5:26379", "[::1]:26380")
    assert target.password == "hunter22"
    assert target.sentinel_login() == {"username": "watcher", "password": "watch-pw"}
    assert "hunter22" not in target.where


def test_cluster_nodes_from_env_as_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gateway.store import redis_target

    certificate = tmp_path / "client.pem"
    certificate.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("CHATGATE_REDIS__CLUSTER_NODES", '["10.0.0.5:7000", "10.0.0.6:7000"]')
    monkeypatch.setenv("CHATGATE_REDIS__USERNAME", "gw")
    monkeypatch.setenv("CHATGATE_REDIS__PASSWORD", "hunter22")
    monkeypatch.setenv("CHATGATE_REDIS__TLS", "true")
    monkeypatch.setenv("CHATGATE_REDIS__TLS_CERTFILE", str(certificate))
    settings = load_settings(None)
    assert settings.redis.enabled and settings.redis.cluster_shards == 16
    target = redis_target(settings)
    assert target.mode == "cluster" and target.tls and target.username == "gw"
    assert target.ssl["ssl_certfile"] == str(certificate)
    assert target.cluster_nodes == ("10.0.0.5:7000", "10.0.0.6:7000")
    assert "hunter22" not in target.where


def test_empty_tls_file_variables_mean_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TLS_CA_CERTS", "TLS_CERTFILE", "TLS_KEYFILE"):
        monkeypatch.setenv(f"CHATGATE_REDIS__{name}", "")
    settings = load_settings(None)
    assert (settings.redis.tls_ca_certs, settings.redis.tls_certfile) == (None, None)
    assert settings.redis.tls_keyfile is None


@pytest.mark.parametrize(
    ("env", "why"),
    [
        (
            {
                "CHATGATE_REDIS__CLUSTER_NODES": '["10.0.0.5:7000"]',
                "CHATGATE_REDIS__URL": "redis://localhost:6379/0",
            },
            "not redis.url and redis.cluster_nodes",
        ),
        (
            {"CHATGATE_REDIS__CLUSTER_NODES": '["10.0.0.5:7000"]', "CHATGATE_REDIS__DB": "2"},
            "database 0 only",
        ),
        ({"CHATGATE_REDIS__CLUSTER_NODES": '["10.0.0.5"]'}, "is not host:port"),
        (
            {
                "CHATGATE_REDIS__CLUSTER_NODES": '["10.0.0.5:7000"]',
                "CHATGATE_REDIS__TLS_KEYFILE": __file__,  # a file that is there
            },
            "tls_keyfile needs redis.tls_certfile",
        ),
        (
            {
                "CHATGATE_REDIS__CLUSTER_NODES": '["10.0.0.5:7000"]',
                "CHATGATE_REDIS__TLS": "true",
                "CHATGATE_REDIS__TLS_CA_CERTS": "/etc/chatgate/no-such-ca.pem",
            },
            "tls_ca_certs: Path does not point to a file (got '/etc/chatgate/no-such-ca.pem')",
        ),
        (
            {
                "CHATGATE_REDIS__CLUSTER_NODES": '["10.0.0.5:7000"]',
                "CHATGATE_REDIS__CLUSTER_SHARDS": "0",
            },
            "cluster_shards",
        ),
    ],
)
def test_a_cluster_setup_that_cannot_work_is_refused(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], why: str
) -> None:
    [line] = problems(monkeypatch, **env)
    assert line.startswith("redis") and why in line


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"CHATGATE_REDIS__SENTINELS": '["10.0.0.5:26379"]'}, "needs redis.sentinel_master"),
        ({"CHATGATE_REDIS__SENTINEL_MASTER": "main"}, "needs redis.sentinels"),
        (
            {
                "CHATGATE_REDIS__URL": "redis://localhost:6379/0",
                "CHATGATE_REDIS__SENTINELS": '["10.0.0.5:26379"]',
                "CHATGATE_REDIS__SENTINEL_MASTER": "main",
            },
            "not redis.url and redis.sentinels",
        ),
        (
            {"CHATGATE_REDIS__SENTINELS": '["10.0.0.5"]', "CHATGATE_REDIS__SENTINEL_MASTER": "m"},
            "is not host:port",
        ),
        (
            {
                "CHATGATE_REDIS__SENTINELS": '["10.0.0.5:26379"]',
                "CHATGATE_REDIS__SENTINEL_MASTER": "main",
                "CHATGATE_REDIS__SENTINEL_USERNAME": "watcher",
            },
            "sentinel_username needs redis.sentinel_password",
        ),
    ],
)
def test_a_sentinel_setup_that_cannot_work_is_refused(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], why: str
) -> None:
    [line] = problems(monkeypatch, **env)
    assert line.startswith("redis") and why in line
