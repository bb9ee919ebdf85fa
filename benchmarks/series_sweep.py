"""A checkpoint sweep: a 10-checkpoint series over the 34 SyntaxGym 2020 suites, in one
series request, against one evaluation per (checkpoint, suite) as a per-task shell loop
asks for them; wall time from the first request to the last stored result, and how many
times the scoring worker loaded a checkpoint (its log's `loaded model` lines).

Embedded defaults (SQLite, the private Redis broker), one storing worker (queue celery)
and one scoring worker (queue gpu, CPU, the site's GYM_MAX_LOADED_MODELS), the series
first. The checkpoints are hard-linked copies of one tiny random GPT-2 laid out as a
Hugging Face Trainer folder (checkpoint-100/, ..., checkpoint-1000/ with
trainer_state.json): another model to the site each, the same weights, loaded from disk
each time a worker needs it. Each way gets its own copies, so none reuses the other's
runs. "series": `POST /api/model-series/<name>/evaluate/`'s service with every suite,
queued member by member (each checkpoint's suites packed in its tasks). "per-pair": one
request per (checkpoint, suite), suite after suite, each checkpoint in turn, as
`for task in tasks; for ckpt in ckpts; do ...; done` sends them (BabyLM's pipeline
loads the model once per task).

    .venv/bin/python benchmarks/series_sweep.py [--checkpoints 10] [--suites 34] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.end_to_end import (  # noqa: E402 - after the path is set
    NEXTFLOW,
    agreement_suite,
    embedded_site,
    received,
    start_worker,
)

WAYS = ("series", "per-pair")
STEP = 100


def trainer_folder(model: Path, folder: Path, checkpoints: int) -> Path:
    """`folder` with checkpoint-<step>/ for each step, hard links of `model`."""
    for n in range(1, checkpoints + 1):
        step = n * STEP
        checkpoint = folder / f"checkpoint-{step}"
        shutil.copytree(model, checkpoint, copy_function=os.link)
        state = {"global_step": step, "num_input_tokens_seen": step * 4096}
        (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    return folder


def wait_ready(workers: dict[str, Any], logs: dict[str, Path], limit: float = 900) -> None:
    """Until each worker says it is ready (a busy machine may take minutes)."""
    deadline = time.monotonic() + limit
    for queue, worker in workers.items():
        while " ready." not in logs[queue].read_text():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"series sweep: the {queue} worker did not start: "
                    + logs[queue].read_text()[-2000:]
                )
            time.sleep(0.5)


def loads(log: Path) -> int:
    return log.read_text().count("loaded model ")


def since(log: Path, offset: int) -> Path:
    """What `log` gained after `offset` characters, as a file of its own."""
    part = log.with_suffix(f".{offset}.log")
    part.write_text(log.read_text()[offset:])
    return part


def run_way(
    way: str, tmp: Path, logs: dict[str, Path], model: Path, suites: list, count: int
) -> dict:
    """One way through the running workers, on its own copies of the checkpoints."""
    from evaluations.models import Evaluation
    from evaluations.syntaxgym import services
    from evaluations.training import series as series_services

    folder = trainer_folder(model, tmp / "models" / way, count)
    series = series_services.series_register(name=f"sweep-{way}", folder=str(folder))
    members = [m.model for m in series.members.order_by("position")]
    offset = len(logs["gpu"].read_text())
    start = time.perf_counter()
    if way == "series":
        series_services.series_evaluate(series=series, suites=suites, user=None)
    else:
        for suite in suites:
            for model_row in members:
                services.evaluation_request(model=model_row, suites=[suite])
    runs = Evaluation.objects.filter(model__in=members)
    while runs.filter(status__in=("queued", "running")).exists():
        if time.perf_counter() - start > 3600:
            raise SystemExit("series sweep: gave up after an hour")
        time.sleep(0.2)
    elapsed = time.perf_counter() - start
    time.sleep(0.5)  # the worker's last log lines
    log = since(logs["gpu"], offset)
    return {
        "way": way,
        "seconds": elapsed,
        "evaluations": runs.count(),
        "done": runs.filter(status="done").count(),
        "loads": loads(log),
        "tasks": received(log, "runs.work") + received(log, "runs.work_pack"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoints", type=int, default=10)
    parser.add_argument("--suites", type=int, default=34, help="how many nextflow suites")
    parser.add_argument("--smoke", action="store_true", help="3 checkpoints, 3 small suites")
    parser.add_argument("--keep", action="store_true", help="keep the folder (workers' logs)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gym-sweep-"))
    try:
        measure(args, tmp)
    finally:
        if args.keep:
            print(f"series sweep: the database and the workers' logs are in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def measure(args: argparse.Namespace, tmp: Path) -> None:
    env = embedded_site(tmp, "sweep")
    from django.conf import settings

    from evaluations import baseline
    from suites.formats import canonical
    from suites.syntaxgym import services as suite_services

    checkpoints = 3 if args.smoke else args.checkpoints
    sources: list[Any]
    if not args.smoke and not NEXTFLOW.is_dir():
        raise SystemExit(f"series sweep: no suites at {NEXTFLOW} (set GYM_SHARED_DATA)")
    if args.smoke:
        # Generated suites: the project's own agreement items, a few each.
        items = [("The keys", "here ."), ("The dog", "outside ."), ("My friend", "late .")]
        sources = [agreement_suite(f"agree-{n}", items) for n in range(3)]
        where = "generated agreement suites"
    else:
        sources = [f.read_bytes() for f in sorted(NEXTFLOW.glob("*.json"))[: args.suites]]
        where = f"SyntaxGym 2020 suites ({NEXTFLOW})"
    suites = [suite_services.suite_import(source=s, owner=None).suite for s in sources]
    from suites.syntaxgym import selectors

    texts = [
        " ".join(r.strip() for r in regions if r.strip())
        for suite in suites
        for _, _, regions in canonical.sentences(selectors.suite_canonical(suite))
    ]
    model = baseline.build_random_gpt2(tmp / "tiny", texts, vocab_size=2000)
    settings.GYM_MODEL_DIRS = [tmp / "models"]
    os.environ["GYM_MODEL_DIRS"] = str(tmp / "models")
    env["GYM_MODEL_DIRS"] = str(tmp / "models")
    sentences = len(texts)
    print(
        f"series sweep: {checkpoints} checkpoints x {len(suites)} {where}, {sentences} "
        f"sentences a checkpoint, tiny GPT-2 (CPU, one scoring worker, "
        f"GYM_MAX_LOADED_MODELS={settings.GYM_MAX_LOADED_MODELS}), load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    # One storing and one scoring worker for both ways: each way has its own checkpoints,
    # so the worker's loaded models never serve the other way.
    logs = {queue: tmp / f"worker-{queue}.log" for queue in ("celery", "gpu")}
    worker_env = {**env, "GYM_SCORING_CACHE": str(tmp / "checks")}
    workers = {queue: start_worker(queue, worker_env, logs[queue]) for queue in logs}
    figures = {}
    try:
        wait_ready(workers, logs)
        for way in WAYS:
            result = run_way(way, tmp, logs, model, suites, checkpoints)
            figures[way] = result
            print(
                f"series sweep, {way:8}: {result['done']}/{result['evaluations']} evaluations "
                f"done in {result['seconds']:.1f} s, {result['loads']} checkpoint loads, "
                f"{result['tasks']} scoring task(s)"
            )
            if result["done"] != result["evaluations"] or result["evaluations"] != (
                checkpoints * len(suites)
            ):
                raise SystemExit(f"series sweep: {way}: not every evaluation is done")
    finally:
        for worker in workers.values():
            worker.terminate()
        for worker in workers.values():
            worker.wait(timeout=60)
    series, pairs = figures["series"], figures["per-pair"]
    if series["loads"] != checkpoints:
        raise SystemExit(f"series sweep: the series loaded {series['loads']} times, not once each")
    print(
        f"series sweep: the series request took {series['seconds']:.1f} s with "
        f"{series['loads']} loads, one evaluation per (checkpoint, suite) "
        f"{pairs['seconds']:.1f} s with {pairs['loads']} loads "
        f"({pairs['seconds'] / series['seconds']:.2f}x the time)"
    )


if __name__ == "__main__":
    main()
