#!/usr/bin/env bash
# The whole test suite on a fresh machine: virtualenv, packages, a redis-server binary, then
# every check: ruff, ruff format, mypy --strict, the import contracts, pytest. Any failure
# fails the run. The tests start their own redis-servers on free ports (one server, a
# Sentinel set: a master, a replica and three `redis-server --sentinel`, and a Redis Cluster
# of three masters and three replicas made with `redis-cli --cluster create`); they never
# touch one already running.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "chatgate needs Python 3.11 or newer (found $("$PYTHON" --version 2>&1))." >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'

if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server for the tests..." >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server >/dev/null
fi

# The forged-approval tests write the store the way a command could: sqlite3 and redis-cli.
# The Redis TLS test makes its certificate with openssl.
if ! command -v sqlite3 >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1 \
  || ! command -v openssl >/dev/null 2>&1; then
  echo "installing sqlite3, redis-tools and openssl for the tests..." >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq sqlite3 redis-tools openssl >/dev/null
fi

# The terminal tests run real sandboxes (bwrap) and a real sshd on 127.0.0.1.
if ! command -v bwrap >/dev/null 2>&1 || [ ! -x /usr/sbin/sshd ] || ! command -v ssh >/dev/null 2>&1; then
  echo "installing bubblewrap and openssh for the tests..." >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq bubblewrap openssh-server openssh-client >/dev/null
fi
# The browser tests drive Debian's Chromium (Playwright's own browser download is not used).
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing chromium for the browser tests..." >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi

# The email tests run a private Dovecot (its own config, a free port on 127.0.0.1). The
# package's own system service is not needed, so it is stopped where this installed it.
if [ ! -x /usr/sbin/dovecot ]; then
  echo "installing dovecot-imapd for the email tests..." >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq dovecot-imapd >/dev/null
  if [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now dovecot.service dovecot.socket >/dev/null 2>&1 || true
  fi
fi

# The Matrix tests run a real Synapse homeserver. It gets a virtualenv of its own so its
# pinned dependencies never meet the project's; tests/fixtures_synapse.py starts it.
if [ ! -x .venv-synapse/bin/python ] || ! .venv-synapse/bin/python -c 'import synapse' 2>/dev/null; then
  echo "installing Synapse (matrix-synapse) into .venv-synapse for the Matrix tests..." >&2
  "$PYTHON" -m venv .venv-synapse
  .venv-synapse/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv-synapse/bin/python -m pip install -q --disable-pip-version-check 'matrix-synapse>=1.100'
fi

# slack_sdk ignores NO_PROXY: a proxy from the environment would swallow 127.0.0.1 calls.
unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy ALL_PROXY all_proxy

step() { echo "== $1" >&2; }
step "ruff check"; .venv/bin/ruff check -q .
step "ruff format --check"; .venv/bin/ruff format --check -q .
step "mypy --strict (gateway, adapters, tools, tests)"; .venv/bin/mypy --no-error-summary
step "import contracts"; .venv/bin/lint-imports --no-cache >/dev/null || .venv/bin/lint-imports --no-cache
step "pytest"
# Two workers: most end-to-end tests wait on subprocesses and sockets, so two share the two
# cores well (about 6 minutes instead of 10). TEST_WORKERS=0 runs them in this process.
# The output is kept in .pytest_cache/last-run.log too. When the run fails, the lines that say
# why (an internal error, a worker that went down, the failed tests) come again at the very
# end, where a viewer that shows only the tail of a long output still finds them.
mkdir -p .pytest_cache
log=.pytest_cache/last-run.log
status=0
.venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist worksteal "$@" 2>&1 | tee "$log" \
  || status=$?
if [ "$status" -ne 0 ]; then
  echo "== pytest exited with $status; the lines that say why:" >&2
  grep -E "INTERNALERROR|node down|crashed|Interrupted|^(FAILED|ERROR) " "$log" | tail -80 >&2 \
    || echo "(none matched: see $log)" >&2
fi
exit "$status"
