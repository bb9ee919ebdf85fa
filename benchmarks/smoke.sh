#!/usr/bin/env bash
# CI's smoke mode: every benchmark on a small workload, to prove the scripts still run.
# The figures reported in notes come from the full runs (see benchmarks/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# The soak's production shape creates (and drops) a throw-away database on CI's
# PostgreSQL; without one it runs the embedded shape.
POSTGRES=${DATABASE_URL:-}
# Benchmarks use their own throw-away SQLite databases and private brokers.
unset DATABASE_URL CELERY_BROKER_URL
for script in suites scoring site end_to_end minimal_pairs large_suite probing load uploads training ngram_out_of_core separators probes soak word_probability artifact_fetch series_sweep; do
  if [ -f "benchmarks/$script.py" ]; then
    extra=()
    if [ "$script" = soak ]; then
      case "$POSTGRES" in
        postgres*) extra=(--shape production --postgres "$POSTGRES") ;;
        *) extra=(--shape embedded) ;;
      esac
    fi
    echo "== benchmarks/$script.py --smoke ${extra[*]}"
    $PY "benchmarks/$script.py" --smoke "${extra[@]}" > "/tmp/gym-smoke-$script.log" 2>&1 || {
      tail -n 60 "/tmp/gym-smoke-$script.log"; echo "benchmarks/$script.py --smoke failed" >&2; exit 1; }
    grep -v "Writing model shards\|Loading weights\|WARNING/MainProcess\|^\s*$" "/tmp/gym-smoke-$script.log" | tail -n 25 || true
  fi
done
