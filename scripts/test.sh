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
# The tests start hundreds of Python processes (workers, sites, commands): each reads the
# project's compiled modules (and pytest's rewritten tests) from __pycache__ instead of
# compiling them again, even where the machine's environment turns that cache off.
unset PYTHONDONTWRITEBYTECODE
# The tests run in GYM_TEST_PROCESSES processes (pytest-xdist; 1: in this process alone).
# Each process has its own test database (pytest-django adds _gw0, _gw1, ...) and its own
# Redis database after GYM_TEST_REDIS_URL's (tests/celery_harness.py). Many tests wait on
# real workers rather than compute, so one process more than the cores keeps them busy.
processes=${GYM_TEST_PROCESSES:-3}
if [ "$processes" -gt 1 ]; then
  # --dist load hands out tests a few at a time as processes finish, the slow ones first
  # (tests/conftest.py orders them).
  .venv/bin/python -m pytest -n "$processes" --dist load --maxschedchunk 4 "$@"
else
  .venv/bin/python -m pytest "$@"
fi
# On PostgreSQL (CI) the tests of SQLite's own code paths skip: the embedded default's
# chunked store and its online backup. A whole run also runs their modules on SQLite.
if [ $# -eq 0 ] && [[ "${DATABASE_URL:-}" == postgres* ]]; then
  echo "test: the modules of SQLite's own code paths, on SQLite"
  env -u DATABASE_URL .venv/bin/python -m pytest -q \
    tests/syntaxgym/test_store_in_chunks.py tests/test_backup.py
fi
