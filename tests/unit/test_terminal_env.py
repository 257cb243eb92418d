"""safe_env is an allowlist (issue 22, finding 11): only harmless variables and the ones the
operator names reach a command, and never a value that carries a secret."""

from tools.shell.terminal.env import NON_INTERACTIVE, safe_env


def test_keeps_the_basics_and_drops_everything_else() -> None:
    env = safe_env(
        base={
            "PATH": "/bin",
            "HOME": "/home/x",
            "LANG": "C.UTF-8",
            "LC_ALL": "C",
            "TZ": "UTC",
            "GITHUB_TOKEN": "t",
            "aws_secret_access_key": "s",
            "MONKEY": "ok",
            "X_PASSWORD": "p",
        }
    )
    assert {"PATH", "HOME", "LANG", "LC_ALL", "TZ"} <= env.keys()
    assert not {"GITHUB_TOKEN", "aws_secret_access_key", "MONKEY", "X_PASSWORD"} & env.keys()
    assert NON_INTERACTIVE.items() <= env.items()


def test_secrets_the_old_denylist_let_through() -> None:
    env = safe_env(
        base={
            "CACHE_URL": "redis://:hunter2@cache:6379/0",  # a password and no user
            "ALERT_HOOK": "https://hooks.slack.com/services/T000/B000/XXXX",
            "STRIPE_SK": "sk_live_abcdef",
            "ADMIN_PW": "hunter2",
            "PATH": "/bin",
        }
    )
    assert set(env) == {"PATH", *NON_INTERACTIVE}


def test_passthrough_is_allowed_but_values_are_still_checked() -> None:
    env = safe_env(
        secrets=["abcdefgh1234"],
        passthrough=["BUILD_FLAVOR", "BEARER", "MIRROR", "WEBHOOK"],
        base={
            "BUILD_FLAVOR": "release",
            "BEARER": "Bearer abcdefgh1234",  # holds a configured secret
            "MIRROR": "https://user:pw@mirror.example/simple",
            "WEBHOOK": "https://HOOKS.SLACK.COM/services/T/B/x",
            "CHATGATE_LLM__API_KEY": "k",
        },
    )
    assert env.get("BUILD_FLAVOR") == "release"
    assert not {"BEARER", "MIRROR", "WEBHOOK", "CHATGATE_LLM__API_KEY"} & env.keys()


def test_a_basic_variable_holding_a_secret_is_dropped() -> None:
    env = safe_env(secrets=["s3cr3t-value"], base={"LANG": "s3cr3t-value", "TERM": "xterm"})
    assert "LANG" not in env and env["TERM"] == "xterm"
