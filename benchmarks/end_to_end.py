"""End-to-end time for a tiny random model on all 34 nextflow suites through a real worker.

Starts a Celery worker process (embedded defaults: SQLite and the filesystem broker, in a
throw-away folder), queues the model on every suite through the same service the site
uses, and waits until every evaluation is done. Run by hand, or with --smoke in CI:
    .venv/bin/python benchmarks/end_to_end.py [--suites N] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
NEXTFLOW = (
    Path(os.environ.get("GYM_SHARED_DATA", REPO.parent / "shared" / "data"))
    / "syntaxgym-2020"
    / "nextflow"
)


def embedded_site(tmp: Path, name: str) -> dict[str, str]:
    """Point this process at a throw-away embedded setup in `tmp` (SQLite, the filesystem
    broker, no hub), set Django up and migrate; returns the environment for workers."""
    env = {
        **os.environ,
        "GYM_VAR_DIR": str(tmp),
        "DATABASE_URL": f"sqlite:///{tmp}/{name}.sqlite3",
        "CELERY_BROKER_URL": "filesystem://",
        "DJANGO_SETTINGS_MODULE": "gym.settings",
        "HF_HUB_OFFLINE": "1",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return env


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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--suites", type=int, default=34, help="how many nextflow suites (default all 34)"
    )
    parser.add_argument("--smoke", action="store_true", help="3 suites, for CI")
    args = parser.parse_args()
    count = 3 if args.smoke else args.suites
    if not NEXTFLOW.is_dir():
        print(f"end-to-end: not measured, no suites at {NEXTFLOW}")
        return

    tmp = Path(tempfile.mkdtemp(prefix="gym-e2e-"))
    env = embedded_site(tmp, "e2e")
    from evaluations import baseline, services
    from evaluations.models import Evaluation
    from suites import formats
    from suites import services as suite_services

    files = sorted(NEXTFLOW.glob("*.json"))[:count]
    suites = [suite_services.suite_import(source=f.read_bytes(), owner=None).suite for f in files]
    sentences = [
        " ".join(r.strip() for r in regions if r.strip())
        for s in suites
        for _i, _c, regions in formats.sentences(
            formats.load_suite_file(files[suites.index(s)]).suite
        )
    ]
    # Under the model folder (GYM_MODEL_DIRS, default var/models): others are refused.
    model_dir = baseline.build_random_gpt2(tmp / "models" / "tiny", sentences, vocab_size=2000)
    model = services.model_register(source=str(model_dir), name="tiny")

    # As the run command does: one worker stores (queue celery), one scores (queue gpu).
    workers = {
        queue: start_worker(queue, env, tmp / f"worker-{queue}.log") for queue in ("celery", "gpu")
    }
    try:
        deadline = time.monotonic() + 120
        for queue, worker in workers.items():
            log = tmp / f"worker-{queue}.log"
            while " ready." not in log.read_text():
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        f"end-to-end: the {queue} worker did not start: " + log.read_text()[-2000:]
                    )
                time.sleep(0.2)
        start = time.perf_counter()
        outcome = services.evaluation_request(model=model, suites=suites)
        pks = [e.pk for e in outcome.evaluations]
        while True:
            states = list(Evaluation.objects.filter(pk__in=pks).values_list("status", flat=True))
            if all(s in ("done", "failed") for s in states):
                break
            if time.perf_counter() - start > 1800:
                raise SystemExit("end-to-end: gave up after 30 minutes")
            time.sleep(0.5)
        elapsed = time.perf_counter() - start
    finally:
        for worker in workers.values():
            worker.terminate()
        for worker in workers.values():
            worker.wait(timeout=60)
    done = Evaluation.objects.filter(pk__in=pks, status="done").count()
    total_sentences = sum(e.progress_total for e in Evaluation.objects.filter(pk__in=pks))
    print(
        f"end-to-end: {done}/{len(pks)} evaluations done, {total_sentences} sentences, "
        f"{elapsed:.1f} s from request to stored results "
        f"({total_sentences / elapsed:.0f} sentences/s; tiny 2-layer model, CPU, one scoring worker)"
    )
    if done != len(pks):
        raise SystemExit("end-to-end: some evaluations failed")


if __name__ == "__main__":
    main()
