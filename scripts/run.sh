#!/usr/bin/env bash
# Set up and run Gym on this machine with its embedded defaults: SQLite, a broker that
# needs no server, the web server and one worker. Open http://127.0.0.1:8000 .
# Environment: PORT (default 8000); DATABASE_URL / CELERY_BROKER_URL to use real services.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p var
PY=.venv/bin/python
$PY manage.py migrate --noinput
$PY manage.py import_suites examples --on-conflict skip
$PY manage.py import_minimal_pairs examples/minimal_pairs --on-conflict skip --tags agreement,npi --description "Gym's example minimal pairs: agreement across attractors, NPI licensing, quoted speech"
$PY manage.py gym_bootstrap

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM
# Two workers, as deployed: one stores results and progress (queue celery), one scores
# (queue gpu; on the CPU here). One worker for both would hold progress back until the
# scoring ends.
$PY -m celery -A gym worker --loglevel INFO --concurrency 1 --queues celery \
  --hostname "gym-store@%h" &
pids+=($!)
$PY -m celery -A gym worker --loglevel INFO --concurrency 1 --queues gpu \
  --hostname "gym-score@%h" &
pids+=($!)
echo "Gym is starting on http://127.0.0.1:${PORT:-8000}/"
$PY manage.py runserver "127.0.0.1:${PORT:-8000}" --noreload &
pids+=($!)
wait -n "${pids[@]}"
