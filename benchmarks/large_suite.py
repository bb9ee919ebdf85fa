"""A 100,000-item suite end to end on the embedded default setup.

What `bash scripts/run.sh` runs, in a throw-away folder: SQLite, the embedded Redis
broker, one storing worker (queue celery) and one scoring worker (queue gpu). It imports
a generated suite of N items (2 conditions, 3 regions; about 16 MB of JSON at 100,000),
asks for a tiny random GPT-2 on it through the service the site uses, and waits until the
run is done or failed. Prints the suite's size, the time of each step, and the run's end.
    .venv/bin/python benchmarks/large_suite.py [--items N] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.end_to_end import embedded_site, start_worker  # noqa: E402

NOUNS = ["dog", "cat", "author", "senator", "farmer", "pilot", "doctor", "baker"]
PLACES = ["here", "there", "outside", "upstairs", "nearby", "inside", "away", "home"]


def make_suite(items: int) -> dict[str, Any]:
    """Agreement items, each sentence made distinct by its number."""

    def condition(name: str, noun: str, verb: str, n: int) -> dict[str, Any]:
        return {
            "condition_name": name,
            "regions": [
                {"region_number": 1, "content": f"The {noun}"},
                {"region_number": 2, "content": verb},
                {"region_number": 3, "content": f"{PLACES[n % len(PLACES)]} {n}."},
            ],
        }

    return {
        "meta": {"name": f"agreement x{items}", "metric": "sum"},
        "region_meta": {"1": "Subject", "2": "Verb", "3": "End"},
        "predictions": [{"type": "formula", "formula": "(2;%mismatch%) > (2;%match%)"}],
        "items": [
            {
                "item_number": n + 1,
                "conditions": [
                    condition("match", NOUNS[n % len(NOUNS)], "is", n),
                    condition("mismatch", NOUNS[n % len(NOUNS)], "are", n),
                ],
            }
            for n in range(items)
        ],
    }


def token_storage(evaluation_ids: list[int]) -> tuple[int, int]:
    """(characters of the stored token JSON as the database holds it, tokens) of the
    evaluations' items: what keeping token surprisals costs."""
    from django.db.models import Sum, TextField
    from django.db.models.functions import Cast, Length

    from evaluations.models import ItemResult

    rows = ItemResult.objects.filter(evaluation_id__in=evaluation_ids, tokens__isnull=False)
    size = rows.aggregate(size=Sum(Length(Cast("tokens", TextField()))))["size"] or 0
    count = sum(
        len(packed["text"])
        for tokens in rows.values_list("tokens", flat=True).iterator()
        for packed in tokens.values()
    )
    return size, count


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="gym-large-"))
    try:
        run(tmp)
    finally:
        # The database, model and broker folders of a full run take hundreds of MB.
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp: Path) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=100_000, help="items (default 100,000)")
    parser.add_argument("--smoke", action="store_true", help="2,000 items, for CI")
    args = parser.parse_args()
    items = 2_000 if args.smoke else args.items

    env = embedded_site(tmp, "large")
    from evaluations import baseline
    from evaluations.language_models import registry as model_registry
    from evaluations.models import Evaluation, ItemResult
    from evaluations.syntaxgym import services
    from suites.syntaxgym import services as suite_services

    data = make_suite(items)
    source = json.dumps(data, separators=(",", ":")).encode()
    started = time.perf_counter()
    suite = suite_services.suite_import(source=source, owner=None).suite
    imported = time.perf_counter() - started
    sentences = [f"The {noun} is {place} 1." for noun in NOUNS for place in PLACES]
    # Local models must lie under a model folder (GYM_MODEL_DIRS, default var/models).
    model_dir = baseline.build_random_gpt2(tmp / "models" / "tiny", sentences, vocab_size=300)
    model = model_registry.model_register(source=str(model_dir), name="tiny")

    logs = {queue: tmp / f"worker-{queue}.log" for queue in ("celery", "gpu")}
    workers = {queue: start_worker(queue, env, logs[queue]) for queue in logs}
    try:
        deadline = time.monotonic() + 180
        for queue, worker in workers.items():
            while " ready." not in logs[queue].read_text():
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"large suite: the {queue} worker did not start")
                time.sleep(0.2)
        started = time.perf_counter()
        evaluation = services.evaluation_request(model=model, suites=[suite]).evaluations[0]
        requested = time.perf_counter() - started
        scored_at = None
        while True:
            evaluation.refresh_from_db()
            if scored_at is None and evaluation.progress_done >= evaluation.progress_total > 0:
                scored_at = time.perf_counter() - started
            if evaluation.finished:
                break
            for queue, worker in workers.items():
                if worker.poll() is not None:
                    raise SystemExit(
                        f"large suite: the {queue} worker died: {logs[queue].read_text()[-3000:]}"
                    )
            if time.perf_counter() - started > 3 * 3600:
                raise SystemExit("large suite: gave up after 3 hours")
            time.sleep(0.5)
        elapsed = time.perf_counter() - started
    finally:
        for worker in workers.values():
            worker.terminate()
        for worker in workers.values():
            worker.wait(timeout=120)
    stored = ItemResult.objects.filter(evaluation=evaluation).count()
    token_bytes, tokens = token_storage([evaluation.pk])
    print(
        f"large suite: {items} items, {len(source) / 1e6:.1f} MB of JSON, "
        f"{evaluation.progress_total} sentences (embedded default: SQLite, private Redis broker)"
    )
    print(f"large suite: import {imported:.1f} s; request (snapshot + publish) {requested:.1f} s")
    print(
        f"large suite: scored after {scored_at or 0:.1f} s, {evaluation.status} after "
        f"{elapsed:.1f} s; {stored} item rows stored; accuracy {evaluation.accuracy}"
    )
    print(
        f"large suite: token surprisals stored: {tokens} tokens in {token_bytes / 1e6:.2f} MB "
        f"of JSON, {token_bytes / max(tokens, 1):.1f} bytes a token"
    )
    errors = [
        line
        for log in logs.values()
        for line in log.read_text().splitlines()
        if "JSONDecodeError" in line or "Traceback" in line
    ]
    if evaluation.status != Evaluation.Status.DONE or stored != items or errors:
        raise SystemExit(f"large suite: {evaluation.status}: {evaluation.error} {errors[:5]}")


if __name__ == "__main__":
    main()
