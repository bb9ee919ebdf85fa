#!/usr/bin/env bash
# Set up and run every test: lint, type check, unit, integration (real Redis / PostgreSQL /
# Celery worker when reachable; required when CI is set) and browser tests (Debian chromium).
# Extra arguments go to pytest, e.g. scripts/test.sh -k formats
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev

if ! command -v chromium >/dev/null 2>&1; then
  echo "test: installing Debian's chromium for the browser tests"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi

.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Types of gym/, suites/, evaluations/ and tests/ (pyproject.toml); the cache in .mypy_cache
# brings a warm run from minutes down to seconds.
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
