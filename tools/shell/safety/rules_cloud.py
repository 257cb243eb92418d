"""Command-line clients that delete what lives elsewhere: clusters (kubectl, helm), cloud
accounts (aws, gcloud, az, terraform), repositories (gh), databases (dropdb, mysqladmin),
object stores, backups and virtual machines."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from tools.shell.safety.context import Context, Rule, shown
from tools.shell.safety.model import Command, Hit


@dataclass(frozen=True)
class Client:
    what: str  # what it destroys, for the reason: "cluster resources"
    verbs: frozenset[str]  # destructive words among the first `depth` operands
    depth: int = 1
    value_options: frozenset[str] = frozenset()  # global options taking a value (-n ns)
    # Destructive when these options appear with one of the operands given (sub, flags).
    flagged: tuple[tuple[str, re.Pattern[str]], ...] = ()
    prefixes: tuple[str, ...] = ()  # destructive operation prefixes (aws delete-*)


def _verbs(*words: str) -> frozenset[str]:
    return frozenset(words)


_K8S = Client(
    "cluster resources",
    _verbs("delete", "drain", "uninstall"),
    value_options=frozenset(
        {"-n", "--namespace", "--context", "--kubeconfig", "-s", "--server", "--cluster", "--user"}
    ),
    flagged=(
        ("replace", re.compile(r"--force")),
        ("apply", re.compile(r"--prune")),
        ("scale", re.compile(r"--replicas=0\b")),
    ),
)
_TERRAFORM = Client(
    "infrastructure",
    _verbs("destroy"),
    flagged=(
        ("apply", re.compile(r"(^| )-(destroy|auto-approve)\b|-replace")),
        ("state", re.compile(r"(^| )(rm|push|replace-provider)( |$)")),
        ("workspace", re.compile(r"(^| )delete( |$)")),
        ("force-unlock", re.compile("")),
        ("taint", re.compile("")),
    ),
)
CLIENTS: dict[str, Client] = {
    "kubectl": _K8S,
    "oc": _K8S,
    "helm": Client(
        "cluster releases",
        _verbs("uninstall", "delete", "del", "un", "rollback"),
        value_options=frozenset({"-n", "--namespace", "--kube-context", "--kubeconfig"}),
    ),
    "terraform": _TERRAFORM,
    "tofu": _TERRAFORM,
    "terragrunt": _TERRAFORM,
    "pulumi": Client(
        "infrastructure",
        _verbs("destroy"),
        depth=2,
        value_options=frozenset({"-s", "--stack", "-C", "--cwd"}),
        flagged=(
            ("up", re.compile(r"(^| )(-y|--yes|-f|--skip-preview)\b")),
            ("stack", re.compile(r"(^| )rm( |$)")),
            ("state", re.compile(r"(^| )delete( |$)")),
        ),
    ),
    "aws": Client(
        "cloud resources",
        _verbs("rm", "rb"),
        depth=2,
        value_options=frozenset({"--profile", "--region", "--endpoint-url", "--output"}),
        flagged=(("sync", re.compile(r"--delete\b")), ("mv", re.compile(""))),
        prefixes=("delete-", "terminate-", "remove-", "deregister-", "purge-", "revoke-"),
    ),
    "gcloud": Client(
        "cloud resources",
        _verbs("delete", "reset", "remove-iam-policy-binding"),
        depth=5,
        value_options=frozenset({"--project", "--account", "--configuration", "--zone"}),
    ),
    "gsutil": Client("cloud storage", _verbs("rm", "rb"), flagged=(("rsync", re.compile(r"-d")),)),
    "az": Client("cloud resources", _verbs("delete", "purge", "delete-batch"), depth=5),
    "gh": Client(
        "GitHub data",
        _verbs("delete"),
        depth=2,
        value_options=frozenset({"-R", "--repo"}),
        flagged=(
            ("api", re.compile(r"(-X|--method)[ =]?(DELETE|PUT|PATCH)", re.I)),
            ("repo", re.compile(r"(^| )archive( |$)")),
        ),
    ),
    "glab": Client(
        "GitLab data",
        _verbs("delete"),
        depth=2,
        value_options=frozenset({"-R", "--repo"}),
        flagged=(("api", re.compile(r"(-X|--method)[ =]?(DELETE|PUT|PATCH)", re.I)),),
    ),
    "mysqladmin": Client("databases", _verbs("drop", "shutdown", "kill"), depth=9),
    "rclone": Client(
        "remote files",
        _verbs("delete", "deletefile", "purge", "rmdir", "rmdirs", "cleanup", "dedupe", "sync"),
    ),
    "s3cmd": Client(
        "cloud storage", _verbs("del", "rm", "rb"), flagged=(("sync", re.compile("--delete")),)
    ),
    "mc": Client(
        "object storage", _verbs("rm", "rb"), flagged=(("mirror", re.compile("--remove")),)
    ),
    "restic": Client("backups", _verbs("forget", "prune"), flagged=(("key", re.compile("rm")),)),
    "borg": Client("backups", _verbs("delete", "prune", "compact")),
    "etcdctl": Client("cluster state", _verbs("del", "defrag")),
    "consul": Client("cluster state", _verbs("delete"), depth=2),
    "vault": Client("secrets", _verbs("delete", "destroy", "disable", "revoke"), depth=3),
    "virsh": Client(
        "virtual machines",
        _verbs("destroy", "undefine", "vol-delete", "pool-delete", "pool-destroy", "vol-wipe"),
    ),
    "vagrant": Client("virtual machines", _verbs("destroy")),
    "multipass": Client("virtual machines", _verbs("delete", "purge")),
    "lxc": Client("containers", _verbs("delete", "rm")),
    "incus": Client("containers", _verbs("delete", "rm")),
    "heroku": Client("apps", _verbs("apps:destroy", "pg:reset", "destroy")),
    "flyctl": Client("apps", _verbs("destroy", "delete"), depth=2),
    "fly": Client("apps", _verbs("destroy", "delete"), depth=2),
    "doctl": Client("cloud resources", _verbs("delete", "rm"), depth=4),
    "hcloud": Client("cloud resources", _verbs("delete"), depth=2),
    "vercel": Client("deployments", _verbs("remove", "rm")),
    "firebase": Client(
        "project data",
        _verbs("firestore:delete", "database:remove", "hosting:disable", "functions:delete"),
    ),
    "wrangler": Client("workers", _verbs("delete"), depth=2),
    "npm": Client("published packages", _verbs("unpublish")),
    "supabase": Client("databases", _verbs("reset"), depth=2),
}
_ALWAYS = {
    "dropdb": "dropdb deletes a database",
    "dropuser": "dropuser deletes a database role",
    "pg_dropcluster": "pg_dropcluster deletes a database cluster",
}


def client(cmd: Command, ctx: Context) -> Iterator[Hit]:
    spec = CLIENTS[cmd.name]
    path, rest = _path(cmd, spec)
    head = path[: spec.depth]
    destructive = any(
        w in spec.verbs or (spec.prefixes and w.startswith(spec.prefixes)) for w in head
    )
    destructive = destructive or any(
        sub in path[: max(spec.depth, 2)] and pattern.search(" ".join(rest))
        for sub, pattern in spec.flagged
    )
    if destructive:
        line = " ".join(cmd.args)
        yield Hit("ask", f"{cmd.name} {shown([line], 70)} deletes or replaces {spec.what}")


def _path(cmd: Command, spec: Client) -> tuple[list[str], list[str]]:
    """Operands in order (the subcommand path) and every argument, global options skipped."""
    path: list[str] = []
    rest: list[str] = []
    skip = False
    for word in cmd.words[1:]:
        text = word.text
        rest.append(text)
        if skip:
            skip = False
        elif text in spec.value_options:
            skip = True
        elif not text.startswith("-"):
            path.append(text)
    return path, rest


def always(cmd: Command, ctx: Context) -> Iterator[Hit]:
    if cmd.args[:1] not in (("--help",), ("-?",), ("--version",), ("-V",)):
        yield Hit("ask", f"{_ALWAYS[cmd.name]} ({shown(cmd.args)})")


RULES: dict[str, Rule] = {
    **dict.fromkeys(CLIENTS, client),
    **dict.fromkeys(_ALWAYS, always),
}
