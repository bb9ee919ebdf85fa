#!/usr/bin/env bash
# Install everything Gym needs into this checkout: a Python virtual environment (.venv)
# and the front-end libraries (node_modules). Safe to run again; it only adds what is missing.
# Usage: scripts/setup.sh [--dev]   (--dev adds the test and lint tools)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
req=requirements.txt
[ "${1:-}" = "--dev" ] && req=requirements-dev.txt
stamp=".venv/.installed-$(sha256sum "$req" requirements.txt | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages from $req"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$req" 2>&1 \
    | grep -v "^WARNING: Location" || true
  # pocketsphinx must import without the PortAudio library (only its microphone class
  # needs it, through sounddevice, which Gym never imports).
  .venv/bin/python -c "import django, torch, transformers, celery, pocketsphinx" || {
    echo "setup: Python packages failed to install" >&2; exit 1; }
  touch "$stamp"
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "setup: npm not found; installing Node.js from Debian's packages"
  apt-get update -qq && apt-get install -y -qq nodejs npm
fi
# A stamp of the lock file's content, not its date: a fresh checkout or a rebase touches
# package-lock.json without changing it, and `npm ci` empties node_modules before it
# installs (also when node_modules is a link to an install other checkouts share).
npm_stamp="node_modules/.installed-$(sha256sum package-lock.json | cut -c1-16)"
if [ ! -f "$npm_stamp" ]; then
  echo "setup: installing front-end libraries (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
  touch "$npm_stamp"
fi
echo "setup: done"
