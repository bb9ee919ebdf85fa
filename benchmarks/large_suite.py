"""A 100,000-item suite end to end on the embedded default setup.

What `bash scripts/run.sh` runs, in a throw-away folder: SQLite, the embedded Redis
broker, one storing worker (queue celery) and one scoring worker (queue gpu). It imports
a generated suite of N items (2 conditions, 3 regions; about 16 MB of JSON at 100,000),
asks for a tiny random GPT-2 on it through the service the site uses, and waits until the
run is done or failed. Prints the suite's size, the time of each step, and the run's end.

Meanwhile a web client uploads a small suite through the site's service every half
second (its own connection, the site's busy timeout), as someone using the site would:
printed are the store's duration and number of transactions (from the storing worker's
log) and those writes' latency (max, p95) and failures, all of them and during the store
(issue 23: on SQLite one long store transaction held the write lock, and web writes
failed after the busy timeout).
    .venv/bin/python benchmarks/large_suite.py [--items N] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.end_to_end import agreement_suite, embedded_site, start_worker  # noqa: E402

NOUNS = ["dog", "cat", "author", "senator", "farmer", "pilot", "doctor", "baker"]
PLACES = ["here", "there", "outside", "upstairs", "nearby", "inside", "away", "home"]


def make_suite(items: int) -> dict[str, Any]:
    """Agreement items, each sentence made distinct by its number."""
    return agreement_suite(
        f"agreement x{items}",
        [(f"The {NOUNS[n % len(NOUNS)]}", f"{PLACES[n % len(PLACES)]} {n}.") for n in range(items)],
    )


@dataclass
class WebWrites:
    """Suite uploads every `every` seconds from a thread (its own database connection)
    until stopped: (started at, seconds, error or "") of each."""

    every: float = 0.5
    writes: list[tuple[float, float, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        from django.db import connection

        from suites.syntaxgym import services as suite_services

        n = 0
        while not self.stop.is_set():
            n += 1
            data = make_suite(2)
            data["meta"]["name"] = f"uploaded meanwhile {n}"
            began = time.perf_counter()
            error = ""
            try:
                suite_services.suite_import(source=data, owner=None)
            except Exception as exc:  # noqa: BLE001 - counted and shown
                error = f"{exc.__class__.__name__}: {exc}"
            self.writes.append((began, time.perf_counter() - began, error))
            self.stop.wait(max(0.0, self.every - (time.perf_counter() - began)))
        connection.close()

    def summary(self, since: float = 0.0, until: float = float("inf")) -> str:
        chosen = [(t, e) for began, t, e in self.writes if since <= began <= until]
        if not chosen:
            return "none"
        times = sorted(t for t, _e in chosen)
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        errors = [e for _t, e in chosen if e]
        shown = f" ({errors[0][:80]})" if errors else ""
        return (
            f"{len(chosen)} writes, max {times[-1]:.2f} s, p95 {p95:.2f} s, "
            f"{len(errors)} failed{shown}"
        )


STORE_TASK = re.compile(r"Task runs\.store(?:_part)?\[[^\]]+\] succeeded in ([0-9.]+)s")
STORED = re.compile(r"stored \d+ item rows of evaluation \d+ in (\d+) transactions")


def store_figures(log: str) -> tuple[float, str]:
    """(seconds of the longest store task, its transactions as the store logged them, or
    "1" where it logs none: main's one-transaction store) from the storing worker's log."""
    durations = [float(s) for s in STORE_TASK.findall(log)]
    transactions = STORED.findall(log)
    return max(durations, default=0.0), transactions[-1] if transactions else "1 (not logged)"


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
        web = WebWrites()
        writer = threading.Thread(target=web.run, daemon=True)
        started = time.perf_counter()
        writer.start()
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
        web.stop.set()
        writer.join(120)
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
    store_seconds, transactions = store_figures(logs["celery"].read_text())
    print(
        f"large suite: store {store_seconds:.1f} s (the longest store task) in "
        f"{transactions} transactions"
    )
    print(f"large suite: web writes (suite uploads every 0.5 s), all: {web.summary()}")
    windows = {
        "during the request (snapshot + publish)": (started, started + requested),
        "while scoring (parts kept as they come)": (
            started + requested,
            started + (scored_at or elapsed),
        ),
        "from the end of scoring to done (the store)": (
            started + (scored_at or elapsed),
            started + elapsed,
        ),
    }
    for label, (since, until) in windows.items():
        print(f"large suite: web writes {label}: {web.summary(since=since, until=until)}")
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
