"""End-to-end time of one request over the 34 nextflow suites through real workers,
before and after packing (GYM_PACK_TOKEN_BUDGET).

For each mode it starts a storing worker (queue celery) and a scoring worker (queue gpu)
afresh (embedded defaults: SQLite and the private Redis broker, in a throw-away folder),
asks for the model on every suite through the service the site uses, and waits until
every evaluation is done: from the request to the last stored result, the worker's model
load and load-time checks included. "before" sends one task per suite (packing off,
GYM_PACK_TOKEN_BUDGET=0), "after" sends tasks of a token budget's worth of sentences.
The scoring worker's log says how many tasks it received. Then it prints what a worker
process pays once before its first sentence (imports, Django, model load, the load-time
checks) for the first process and for a later one (checks cached).
    .venv/bin/python benchmarks/end_to_end.py [--suites N] [--shape tiny|small] [--smoke]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
NEXTFLOW = (
    Path(os.environ.get("GYM_SHARED_DATA", REPO.parent / "shared" / "data"))
    / "syntaxgym-2020"
    / "nextflow"
)


def embedded_site(tmp: Path, name: str) -> dict[str, str]:
    """Point this process at a throw-away embedded setup in `tmp` (SQLite, the private
    Redis broker that the run command starts, no hub), set Django up and migrate; returns
    the environment for workers. The broker stops when this process exits."""
    from gym.embedded import RedisServer

    broker = RedisServer(tmp)
    broker.start()
    atexit.register(broker.stop)
    env = {
        **os.environ,
        "GYM_VAR_DIR": str(tmp),
        "DATABASE_URL": f"sqlite:///{tmp}/{name}.sqlite3",
        "CELERY_BROKER_URL": broker.url,
        "DJANGO_SETTINGS_MODULE": "gym.settings",
        "HF_HUB_OFFLINE": "1",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return env


def agreement_suite(
    name: str,
    items: Iterable[tuple[str, str]],
    *,
    verbs: tuple[str, str] = ("is", "are"),
    conditions: tuple[str, str] = ("match", "mismatch"),
) -> dict[str, Any]:
    """A subject-verb agreement suite in SyntaxGym's format: regions Subject, Verb and End,
    an item for each (subject, end) of `items` (numbered from 1), each in the two
    `conditions` with the two `verbs`; it predicts the second verb the more surprising."""
    good, bad = conditions
    return {
        "meta": {"name": name, "metric": "sum"},
        "region_meta": {"1": "Subject", "2": "Verb", "3": "End"},
        "predictions": [{"type": "formula", "formula": f"(2;%{bad}%) > (2;%{good}%)"}],
        "items": [
            {
                "item_number": n,
                "conditions": [
                    {
                        "condition_name": condition,
                        "regions": [
                            {"region_number": 1, "content": subject},
                            {"region_number": 2, "content": verb},
                            {"region_number": 3, "content": end},
                        ],
                    }
                    for condition, verb in zip(conditions, verbs, strict=True)
                ],
            }
            for n, (subject, end) in enumerate(items, 1)
        ],
    }


def throwaway_database(tmp: str | Path, *, replace: bool = False, debug: bool = True) -> None:
    """Point this process at a throw-away SQLite database in `tmp` (a DATABASE_URL already
    set wins, unless `replace`), with DEBUG on unless `debug` is false; set Django up and
    migrate."""
    url = f"sqlite:///{tmp}/bench.sqlite3"
    if replace:
        os.environ["DATABASE_URL"] = url
    else:
        os.environ.setdefault("DATABASE_URL", url)
    os.environ.setdefault("GYM_VAR_DIR", str(tmp))
    if debug:
        os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def start_worker(queue: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    """A Celery worker on one queue, as the run command starts it (logs to `log`)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "gym",
            "worker",
            "-Q",
            queue,
            "-c",
            "1",
            "--without-gossip",
            "--without-mingle",
            "-n",
            f"bench-{queue}@localhost",
            "--loglevel",
            "INFO",
        ],
        cwd=REPO,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


MODES = {"before": 0, "after": None}  # the pack budget; None: the site's setting


def build_model(tmp: Path, shape: str, suites: list[Path]) -> Path:
    """The tiny 2-layer baseline shape (built here), or the GPT-2-small shape of
    benchmarks/scoring.py (built once into $TMPDIR/gym-bench)."""
    from benchmarks.scoring import build_gpt2_small, load_suites
    from evaluations import baseline
    from evaluations.scoring import build_sentence

    texts = [build_sentence(regions)[0] for regions in load_suites(suites[0].parent, None)]
    if shape == "small":
        return build_gpt2_small(
            Path(tempfile.gettempdir()) / "gym-bench" / "gpt2-small-random", texts
        )
    return baseline.build_random_gpt2(tmp / "tiny", texts, vocab_size=2000)


def wait_ready(workers: dict[str, subprocess.Popen], logs: dict[str, Path]) -> None:
    deadline = time.monotonic() + 180
    for queue, worker in workers.items():
        while " ready." not in logs[queue].read_text():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"end-to-end: the {queue} worker did not start: "
                    + logs[queue].read_text()[-2000:]
                )
            time.sleep(0.2)


def received(log: Path, task: str) -> int:
    return sum(
        1
        for line in log.read_text().splitlines()
        if f"Task {task}[" in line and line.rstrip().endswith("received")
    )


def run_mode(
    mode: str, budget: int, tmp: Path, env: dict[str, str], model_dir: Path, suites: list
) -> dict:
    """One request for a fresh copy of the model (its own evaluations) on every suite,
    through fresh workers; seconds from the request to the last stored result."""
    from django.conf import settings

    from evaluations.language_models import registry as model_registry
    from evaluations.models import Evaluation
    from evaluations.syntaxgym import services

    # A hard-linked copy under the site's model folder: another model to the site, the
    # same files to the worker, loaded (and checked) from scratch.
    copy = tmp / "models" / mode
    shutil.copytree(model_dir, copy, copy_function=os.link)
    model = model_registry.model_register(source=str(copy), name=f"model-{mode}")
    worker_env = {**env, "GYM_SCORING_CACHE": str(tmp / f"checks-{mode}")}
    logs = {queue: tmp / f"worker-{mode}-{queue}.log" for queue in ("celery", "gpu")}
    workers = {queue: start_worker(queue, worker_env, logs[queue]) for queue in logs}
    settings.GYM_PACK_TOKEN_BUDGET = budget  # the web side plans the tasks
    try:
        wait_ready(workers, logs)
        start = time.perf_counter()
        pks = [e.pk for e in services.evaluation_request(model=model, suites=suites).evaluations]
        first_progress: float | None = None
        while Evaluation.objects.filter(pk__in=pks, status__in=("queued", "running")).exists():
            if first_progress is None and (
                Evaluation.objects.filter(pk__in=pks, progress_done__gt=0).exists()
                or Evaluation.objects.filter(pk__in=pks, status="done").exists()
            ):
                # The first progress report the site shows: the worker has the model
                # (loaded and checked from scratch) and has scored its first batch.
                first_progress = time.perf_counter() - start
            if time.perf_counter() - start > 1800:
                raise SystemExit("end-to-end: gave up after 30 minutes")
            time.sleep(0.1)
        elapsed = time.perf_counter() - start
        if first_progress is None:
            first_progress = elapsed
    finally:
        for worker in workers.values():
            worker.terminate()
        for worker in workers.values():
            worker.wait(timeout=60)
    runs = Evaluation.objects.filter(pk__in=pks)
    return {
        "mode": mode,
        "budget": settings.GYM_PACK_TOKEN_BUDGET,
        "seconds": elapsed,
        "first_progress_seconds": first_progress,
        "done": runs.filter(status="done").count(),
        "evaluations": len(pks),
        "sentences": sum(e.progress_total for e in runs.only("progress_total")),
        "tasks": received(logs["gpu"], "runs.work") + received(logs["gpu"], "runs.work_pack"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--suites", type=int, default=34, help="how many nextflow suites (default all 34)"
    )
    parser.add_argument(
        "--shape", choices=("tiny", "small"), default="tiny", help="tiny 2-layer or GPT-2 small"
    )
    parser.add_argument("--modes", default="before,after", help="before, after or both")
    parser.add_argument(
        "--budget", type=int, default=0, help="the pack budget of 'after' (default the site's)"
    )
    parser.add_argument("--skip-startup", action="store_true", help="no startup probes")
    parser.add_argument("--smoke", action="store_true", help="3 suites, tiny model, for CI")
    parser.add_argument("--keep", action="store_true", help="keep the folder (workers' logs)")
    args = parser.parse_args()
    count = 3 if args.smoke else args.suites
    if not NEXTFLOW.is_dir():
        print(f"end-to-end: not measured, no suites at {NEXTFLOW}")
        return

    tmp = Path(tempfile.mkdtemp(prefix="gym-e2e-"))
    try:
        measure(args, tmp, sorted(NEXTFLOW.glob("*.json"))[:count])
    finally:
        if args.keep:
            print(f"end-to-end: the database and the workers' logs are in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def measure(args: argparse.Namespace, tmp: Path, files: list[Path]) -> None:
    env = embedded_site(tmp, "e2e")
    from django.conf import settings

    from benchmarks.scoring import startup
    from suites.syntaxgym import services as suite_services

    suites = [suite_services.suite_import(source=f.read_bytes(), owner=None).suite for f in files]
    model_dir = build_model(tmp, "tiny" if args.smoke else args.shape, files)
    print(f"end-to-end: {len(suites)} suites, {args.shape} model, load average {os.getloadavg()}")
    figures = []
    site_budget = settings.GYM_PACK_TOKEN_BUDGET
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        if mode not in MODES:
            raise SystemExit(f"end-to-end: unknown mode {mode!r}; use before and/or after")
        budget = MODES[mode] if MODES[mode] is not None else args.budget or site_budget
        result = run_mode(mode, budget, tmp, env, model_dir, suites)
        figures.append(result)
        print(
            f"end-to-end, {mode:6} (pack budget {result['budget']:>6}): {result['done']}/"
            f"{result['evaluations']} evaluations done, {result['sentences']} sentences in "
            f"{result['tasks']} task(s), {result['seconds']:.1f} s from request to stored "
            f"results ({result['sentences'] / result['seconds']:.0f} sentences/s; CPU, one "
            f"scoring worker); first progress report {result['first_progress_seconds']:.1f} s "
            "after the request (a model new to the worker, its checks not cached)"
        )
        if result["done"] != result["evaluations"]:
            raise SystemExit("end-to-end: some evaluations failed")
    if len(figures) == 2:
        print(
            f"end-to-end: after/before speed-up {figures[0]['seconds'] / figures[1]['seconds']:.2f}x"
        )
    print(f"load average at the end: {os.getloadavg()}")
    if not args.skip_startup:
        # What each worker process above paid once, step by step.
        startup(model_dir, repeat=1)


if __name__ == "__main__":
    main()
