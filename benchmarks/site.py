"""Leaderboard server time and query count with many stored results.

Stores results for M models x S suites directly in the database (bulk_create: done
evaluations with their snapshot, per-item region values and prediction outcomes, plus some
outdated results that the leaderboard must skip), then times GET /leaderboard/ (and the API
and CSV) through Django's test client and counts its SQL queries. It measures a small
board first (5 x 17), then grows it to the full one (20 x 68) in the same database, so
that the two query counts can be compared: they must be equal.

Targets: leaderboard page under 150 ms; a query count that does not grow with the number
of models or suites.

Usage: .venv/bin/python benchmarks/site.py [--models 20] [--suites 68] [--repeat 15]
       [--smoke] [--end-to-end]
The suites are the 34 SyntaxGym 2020 suites twice (nextflow and master versions) from
../shared/data, tagged by circuit; synthetic suites when that folder is absent.
Uses a throw-away SQLite database unless DATABASE_URL is set.
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.end_to_end import agreement_suite, throwaway_database  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GYM_SHARED_DATA", REPO.parent / "shared" / "data")) / "syntaxgym-2020"
# The circuits of Hu et al. (2020), by suite-name prefix.
CIRCUITS = [
    ("number", "agreement"),
    ("npi", "licensing"),
    ("reflexive", "licensing"),
    ("npz", "garden-path"),
    ("mvrr", "garden-path"),
    ("subordination", "gross-syntactic-state"),
    ("center", "center-embedding"),
    ("fgd", "long-distance"),
    ("cleft", "long-distance"),
]


def circuit(name: str) -> list[str]:
    return [tag for prefix, tag in CIRCUITS if name.startswith(prefix)][:1]


def suite_sources(count: int) -> list[tuple[str, Any]]:
    """(name, source) for `count` suites: nextflow first, then master, then synthetic."""
    sources: list[tuple[str, Any]] = []
    for branch in ("nextflow", "master"):
        folder = SHARED / branch
        if folder.is_dir():
            for path in sorted(folder.glob("*.json")):
                name = path.stem if branch == "nextflow" else f"{path.stem} (master)"
                sources.append((name, path.read_text()))
    index = 0
    while len(sources) < count:
        sources.append((f"synthetic {index:03d}", synthetic_suite(index)))
        index += 1
    return sources[:count]


def synthetic_suite(index: int, items: int = 24) -> dict[str, Any]:
    return agreement_suite(
        f"synthetic {index:03d}",
        [(f"The dog {index} {i}", "here.") for i in range(items)],
        conditions=("good", "bad"),
    )


def add_suites(start: int, stop: int) -> list[Any]:
    from suites.models import Suite, Tag
    from suites.syntaxgym import services

    made = []
    for name, source in suite_sources(stop)[start:stop]:
        suite = services.suite_import(source=source, owner=None, name=name).suite
        tags = [Tag.objects.get_or_create(name=t)[0] for t in circuit(name)]
        suite.tags.set(tags)
        made.append(Suite.objects.get(pk=suite.pk))
    return made


def add_results(models: list[Any], suites: list[Any], rng: random.Random) -> int:
    """Done evaluations of every model on every suite, stored with bulk_create. Returns
    the number of item rows in the database."""
    from evaluations.models import Evaluation, EvaluationSnapshot, ItemResult, PredictionResult
    from evaluations.scoring import METRICS
    from suites.syntaxgym import selectors

    snapshots = {s.pk: selectors.suite_canonical(s) for s in suites}
    evaluations = []
    for model in models:
        skill = rng.uniform(0.45, 0.9) if not model.is_baseline else 0.5
        for suite in suites:
            accuracy = min(1.0, max(0.0, rng.gauss(skill, 0.15)))
            evaluations.append(
                Evaluation(
                    model=model,
                    suite=suite,
                    content_hash=suite.content_hash,
                    status=Evaluation.Status.DONE,
                    accuracy=round(accuracy, 4),
                    progress_done=1,
                    progress_total=1,
                )
            )
            # One result in ten also has results for an earlier version of the suite.
            if rng.random() < 0.1:
                evaluations.append(
                    Evaluation(
                        model=model,
                        suite=suite,
                        content_hash="0" * 63 + "1",
                        status=Evaluation.Status.DONE,
                        accuracy=0.0,
                    )
                )
    Evaluation.objects.bulk_create(evaluations, batch_size=500)
    EvaluationSnapshot.objects.bulk_create(
        (EvaluationSnapshot(evaluation=e, content=snapshots[e.suite_id]) for e in evaluations),
        batch_size=500,
    )
    stored = Evaluation.objects.filter(model__in=models, suite__in=suites).values_list(
        "id", "suite_id"
    )
    items, predictions = [], []
    for evaluation_id, suite_id in stored:
        snapshot = snapshots[suite_id]
        regions = len(snapshot["region_meta"])
        for position, item in enumerate(snapshot["items"]):
            values = {
                c["condition_name"]: {
                    m: [round(rng.uniform(0, 20), 3) for _ in range(regions)] for m in METRICS
                }
                for c in item["conditions"]
            }
            outcomes = [rng.random() < 0.7 for _ in snapshot["predictions"]]
            items.append(
                ItemResult(
                    evaluation_id=evaluation_id,
                    item_number=item["item_number"],
                    position=position,
                    values=values,
                    outcomes=outcomes,
                    passed=all(outcomes),
                )
            )
        for position, prediction in enumerate(snapshot["predictions"]):
            predictions.append(
                PredictionResult(
                    evaluation_id=evaluation_id,
                    position=position,
                    formula=prediction["formula"],
                    passed=7,
                    evaluated=10,
                    accuracy=0.7,
                )
            )
        # Flush as we go so that memory stays bounded on the full board.
        if len(items) > 5000:
            ItemResult.objects.bulk_create(items, batch_size=1000)
            items.clear()
    ItemResult.objects.bulk_create(items, batch_size=1000)
    PredictionResult.objects.bulk_create(predictions, batch_size=1000)
    return ItemResult.objects.count()


def add_models(start: int, stop: int) -> list[Any]:
    from evaluations.models import LanguageModel

    return [
        LanguageModel.objects.create(
            name=f"model-{i:02d}" if i else "random-init",
            display_name=f"Model {i:02d}" if i else "Random init (baseline)",
            source=f"bench/model-{i:02d}",
            kind="causal",
            parameter_count=(i + 1) * 10_000_000,
            is_baseline=i == 0,
        )
        for i in range(start, stop)
    ]


def measure(path: str, repeat: int) -> tuple[float, float, int, int]:
    """(median ms, best ms, queries, bytes) of GET path."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    response = client.get(path)  # warm the template cache and the connection
    assert response.status_code == 200, (path, response.status_code)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - start)
    with CaptureQueriesContext(connection) as queries:
        client.get(path)
    return (
        statistics.median(times) * 1000,
        min(times) * 1000,
        len(queries),
        len(response.content),
    )


def report(label: str, repeat: int) -> dict[str, int]:
    from evaluations.syntaxgym import selectors

    board = selectors.leaderboard()
    cells = sum(len(r.cells) for r in board.rows)
    print(f"\n{label}: {len(board.rows)} models x {board.total} suites, {cells} current results")
    counts = {}
    for path in (
        "/leaderboard/",
        "/api/leaderboard/",
        "/leaderboard.csv",
        "/leaderboard/?sort=overall&dir=asc",
    ):
        median, best, queries, size = measure(path, repeat)
        counts[path] = queries
        target = " (target < 150 ms)" if path == "/leaderboard/" else ""
        print(
            f"  GET {path:<36} median {median:6.1f} ms, best {best:6.1f} ms, "
            f"{queries} SQL queries, {size / 1024:.0f} KiB{target}"
        )
    return counts


def end_to_end(args: argparse.Namespace) -> None:
    """The tiny model on all 34 nextflow suites through the real worker."""
    # Measured by the evaluation pipeline's own script, which runs the real worker.
    print("not measured here: see tests/syntaxgym/test_evaluation_worker.py")
    print("(the timed run: .venv/bin/python benchmarks/end_to_end.py)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--suites", type=int, default=68)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--seed", type=int, default=2020)
    parser.add_argument("--smoke", action="store_true", help="small and quick, for CI")
    parser.add_argument(
        "--end-to-end", action="store_true", help="time the tiny model on the nextflow suites"
    )
    args = parser.parse_args()
    if args.end_to_end:
        end_to_end(args)
        return
    if args.smoke:
        args.models, args.suites, args.repeat = 6, 12, 3

    tmp = tempfile.mkdtemp(prefix="gym-bench-site-")
    # The full board's database is ~130 MB: leave nothing behind.
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    throwaway_database(tmp)
    rng = random.Random(args.seed)
    small_models, small_suites = max(1, args.models // 4), max(1, args.suites // 4)

    start = time.perf_counter()
    models = add_models(0, small_models)
    suites = add_suites(0, small_suites)
    add_results(models, suites, rng)
    print(f"stored {small_models} x {small_suites} in {time.perf_counter() - start:.1f} s")
    small = report(f"small board ({small_models} x {small_suites})", args.repeat)

    start = time.perf_counter()
    more_models = add_models(small_models, args.models)
    more_suites = add_suites(small_suites, args.suites)
    add_results(more_models, suites, rng)
    item_rows = add_results(models + more_models, more_suites, rng)
    print(
        f"\nstored up to {args.models} x {args.suites} ({item_rows} item rows) "
        f"in {time.perf_counter() - start:.1f} s"
    )
    large = report(f"full board ({args.models} x {args.suites})", args.repeat)

    same = small == large
    print(f"\nquery counts small vs full: {small} vs {large}: {'constant' if same else 'GROW'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
