#!/usr/bin/env bash
# Run chatgate from a checkout on a fresh machine: creates .venv, installs (again when
# pyproject.toml changes), then runs `chatgate <args>`; default `chat`, the agent in this
# terminal with the embedded store.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
marker=.venv/.chatgate-installed
if [ ! -f "$marker" ] || [ pyproject.toml -nt "$marker" ]; then
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[all]'
  touch "$marker"
fi
[ "$#" -eq 0 ] && set -- chat
exec .venv/bin/chatgate "$@"
