#!/usr/bin/env bash
# Set up and run Gym on this machine with its embedded defaults: SQLite, a broker that
# needs no server, the web server and two workers. Open http://127.0.0.1:8000 .
# Environment: PORT (default 8000); DATABASE_URL / CELERY_BROKER_URL to use real services.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=.venv/bin/python
VAR=${GYM_VAR_DIR:-var}
mkdir -p "$VAR"
# One cache for the web server and the workers (a result page's analysis is computed once
# and warmed by the worker that stores the run; log-in limits count across processes).
export GYM_CACHE_URL=${GYM_CACHE_URL:-file://$(cd "$VAR" && pwd)/cache}
$PY manage.py migrate --noinput
$PY manage.py import_suites examples --on-conflict skip
$PY manage.py import_minimal_pairs examples/minimal_pairs --on-conflict skip --tags agreement,npi --description "Gym's example minimal pairs: agreement across attractors, NPI licensing, quoted speech"
$PY manage.py import_probing_task examples/probing/*.txt --skip-existing --tag agreement \
  --description "Subject number with attractor nouns (the project's own example)"
$PY manage.py gym_bootstrap --evaluate-examples

# Each process runs under a small supervisor that starts it again when it dies, so that
# one crashed worker never takes the site down. Ctrl-C stops everything.
supervise() {
  local name=$1 child=
  shift
  trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; exit 0' TERM INT
  while true; do
    "$@" &
    child=$!
    set +e
    wait "$child"
    code=$?
    set -e
    echo "run: $name exited with status $code; starting it again in 2 s" >&2
    sleep 2
  done
}

pids=()
cleanup() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM
# Two workers, as deployed: one stores results and progress (queue celery) and runs the
# periodic sweep (-B: celery beat), one scores (queue gpu; on the CPU here). One worker
# for both would hold progress back until the scoring ends.
supervise store $PY -m celery -A gym worker --loglevel INFO --concurrency 1 --queues celery \
  --hostname "gym-store@%h" -B --schedule "$VAR/celerybeat-schedule" &
pids+=($!)
supervise score $PY -m celery -A gym worker --loglevel INFO --concurrency 1 --queues gpu \
  --hostname "gym-score@%h" &
pids+=($!)
echo "Gym is starting on http://127.0.0.1:${PORT:-8000}/"
supervise web $PY manage.py runserver "127.0.0.1:${PORT:-8000}" --noreload &
pids+=($!)
wait
