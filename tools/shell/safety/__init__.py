"""Judge a shell command before it runs: allow it, ask a person, or block it outright.

Every simple command is found however it is wrapped or nested and checked structurally;
anything that cannot be understood is at least `ask`.

A verdict's `shape` is what "approve for this session" (and "always allow in this chat")
remembers; a later command is pre-approved only when its shape is the same string. It is
built to name exactly what was shown, never a family of commands:

- per risky simple command: the program (with its directory when given, `./deploy.sh`),
  its subcommand (`git push`), every flag (short clusters of up to three letters split and
  sorted, so `-rf` equals `-f -r`; values kept, `git -C /ws/repo`), and every operand in
  order: relative paths joined to the working directory as written (`build` becomes
  `/ws/build`, `../x` becomes `/ws/../x`; nothing is normalised away, so two different
  words never share a shape), `~` kept as `~`, and URLs, hosts, names, numbers and code
  as written (quoted when they hold spaces); redirect targets likewise (`> /ws/out.txt`);
- what it reads on a pipe: the shapes of the commands feeding it, or a here-document's
  text (`echo '\\! id' | psql` is not `echo '\\! rm x' | psql`);
- the wrappers it runs under, in front (`sudo -u root rm -f -r /ws/x`, `ssh host ...`);
- rule-specific detail: code fed to a shell names the exact feeding commands
  (`curl -s https://x/i.sh | sh`); SQL names each destructive statement by kind and
  object (`... :: DROP TABLE tmp`); kill names the signal and pids (`kill -KILL 4242`);
  a file run after being written in the same line names the command that wrote it
  (`curl -o /ws/i.sh https://x => bash /ws/i.sh`); an environment hook names the
  variable and its value (`GIT_SSH_COMMAND='...' git fetch`);
- when anything depends on a value only known at run time ($VAR from outside, $(cmd),
  input items of xargs) or the text could not be parsed: the whole command text itself.

A verdict is `standing` only when its shape pins what will really run: not when a target
is only known at run time, nor when something in the text may change the directory or
what a name runs (eval, source, builtin/command cd, trap, alias, functions, PATH=;
pinning.py). Such a command is approved once at a time. With `resolve_links`, a target
path through a symbolic link is shown with where it leads (`/ws/out/ (-> /etc)`).

Several risky commands in one call give their shapes sorted and joined with " ; "; a shape
longer than 400 characters is cut and ends in a SHA-256 fingerprint of the whole.
"""

from __future__ import annotations

import dataclasses

from tools.shell.safety.analyzer import Analyzer
from tools.shell.safety.model import SEVERITY, Finding, Verdict
from tools.shell.safety.parse import fallback_commands
from tools.shell.safety.paths import Scope
from tools.shell.safety.policy import ShellPolicy
from tools.shell.safety.shape import exact

__all__ = ["ShellPolicy", "Verdict", "classify", "judge"]

_DEFAULT_POLICY = ShellPolicy()


def classify(
    command: str,
    *,
    policy: ShellPolicy | None = None,
    cwd: str | None = None,
    resolve_links: bool = False,
) -> Verdict:
    """The verdict for `command`; never raises.

    `cwd` (absolute) is where the command will start, so that `rm -rf ../..` can be
    resolved; without it relative paths are judged relative to an unknown directory.
    `resolve_links`: the paths are on this machine's disk as they will be when the command
    runs, so a symbolic link in a target is resolved and named in the shape.
    """
    policy = policy or _DEFAULT_POLICY
    try:
        return judge(str(command), policy=policy, cwd=cwd, resolve_links=resolve_links)
    except Exception as exc:  # fail closed: an internal error must not let a command through
        return _salvage(str(command), policy, exc)


def judge(
    command: str, *, policy: ShellPolicy, cwd: str | None = None, resolve_links: bool = False
) -> Verdict:
    """The verdict for `command` without the safety net of `classify`: an exception here is
    a bug (the fuzz tests call this to find them)."""
    scope = Scope(cwd, links=resolve_links)
    analyzer = Analyzer(policy, scope)
    verdict = summarize(analyzer.run(command))
    if verdict.action == "allow" and analyzer.moves:
        # Allowed, but asked for after outside content: no standing approval may cover it.
        return Verdict("allow", verdict.reason, verdict.shape, standing=False)
    if verdict.action == "ask" and scope.resolved:
        return dataclasses.replace(verdict, pins=tuple(scope.resolved.items()))
    return verdict


def summarize(findings: list[Finding]) -> Verdict:
    risky = [f for f in findings if f.action != "allow"]
    if not risky:
        return Verdict("allow", "no destructive command found")
    top = max(SEVERITY[f.action] for f in risky)
    worst = [f for f in risky if SEVERITY[f.action] == top]
    first = worst[0]
    others = len(dict.fromkeys(f.reason for f in worst)) - 1
    reason = first.reason + (f" (and {others} more)" if others else "")
    if first.action == "block":
        return Verdict("block", reason, exact(first.shape), standing=False)
    shape = " ; ".join(sorted(dict.fromkeys(f.shape for f in worst if f.shape)))
    return Verdict("ask", reason, exact(shape), standing=all(f.pinned for f in risky))


def _salvage(command: str, policy: ShellPolicy, exc: Exception) -> Verdict:
    reason = f"the command could not be checked ({type(exc).__name__})"
    try:
        analyzer = Analyzer(policy, Scope(), root=command)
        for cmd in fallback_commands(command):
            analyzer.check(cmd, ())
        verdict = summarize(analyzer.findings)
        if verdict.action == "block":
            return verdict
    except Exception:  # the crude pass failed too; asking is all that is left
        pass
    return Verdict("ask", reason, command, standing=False)
