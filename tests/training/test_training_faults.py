"""Integration: a training worker SIGKILLed mid-training. Redis gives its task to a new
worker, which resumes from the last checkpoint (weights, optimizer, scheduler, random
states, position in the data), not from zero: the finished model is the one training
straight through gives, each checkpoint is registered once. The new worker is on the
same machine (the run's folder) or on another one, with a training folder and an artifact
cache of its own (the checkpoint comes from the artifact store)."""

from __future__ import annotations

import re
import time

import pytest

from evaluations.models import LanguageModel
from evaluations.runs.lifecycle import run_cancel
from evaluations.training import causal, services
from evaluations.training.data import CorpusSource
from evaluations.training.models import TrainingRun
from evaluations.training.services import local_folder
from evaluations.training.worker import causal_options
from gym import artifact_cache
from suites.corpora.services import corpus_import
from tests.celery_harness import redelivery_env, wait_finished
from tests.conftest import single_torch_thread

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("machine", ["same", "another"])
def test_killed_training_worker_resumes_from_its_last_checkpoint(
    book_corpus, redis_broker, workers, alice, pace, settings, tmp_path, machine
) -> None:
    # Redis re-delivers a killed worker's message after the visibility timeout.
    env = {**redelivery_env(settings, pace), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    workers("celery", **env)
    gpu = workers("gpu", **env)
    pace.hold()
    run = services.training_request(
        corpus=book_corpus,
        name="book-tiny",
        kind="causal",
        options={"preset": "tiny", "steps": 8, "checkpoints": 4, "micro_batch": 4},
        user=alice,
    )
    run = pace.wait_held(run, timeout=180)  # after step 1, before its checkpoint
    out = local_folder(run)
    # Let it write the first checkpoint, then hold it again at a later step.
    pace.release()
    deadline = time.monotonic() + 120
    while not (out / "checkpoint-256" / causal.STATE_NAME).is_file():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    pace.hold()
    deadline = time.monotonic() + 120
    while True:
        run.refresh_from_db()
        if run.progress_done >= 2 and any(c["tokens"] == 256 for c in run.checkpoints):
            break
        assert time.monotonic() < deadline and run.progress_done < 8, run.progress_done
        time.sleep(0.1)
    first_start = run.started_at
    gpu.kill()
    resume_from = causal.latest_checkpoint(out)
    assert resume_from is not None
    resumed_step = causal.load_training_state(resume_from)["step"]
    assert 1 <= resumed_step < 8

    pace.release()
    other = tmp_path / "another-machine"
    if machine == "another":
        # Nothing of the first machine's folders: only the services and the store.
        env = {
            **env,
            "GYM_TRAINING_DIR": str(other / "trained"),
            "GYM_ARTIFACT_CACHE_DIR": str(other / "cache"),
            "GYM_VAR_DIR": str(other / "var"),
        }
    workers("gpu", **env)
    run = wait_finished(TrainingRun, run.pk, what="the resumed training run", timeout=300)
    assert run.status == "done", run.error
    assert run.started_at > first_start  # a second delivery
    assert run.summary["resumed_from_step"] == resumed_step
    assert [c["tokens"] for c in run.checkpoints] == [256, 512, 1024, 2048]
    # Three checkpoints of their own; the last step's is the finished model.
    assert LanguageModel.objects.filter(name__startswith="book-tiny").count() == 4
    assert TrainingRun.objects.count() == 1
    assert [e["step"] for e in run.log if "loss" in e] == list(range(1, 9))
    if machine == "another":
        # It trained on in its own folder, from the checkpoint the store held.
        resumed_here = other / "trained" / out.name
        assert (resumed_here / "model.safetensors").is_file()
        assert not (out / "model.safetensors").exists()
        assert (resumed_here / resume_from.name / causal.STATE_NAME).is_file()

    # The same as training straight through, in this process, with the same options.
    payload = services.training_payload(run)
    with single_torch_thread():
        straight = causal.train_causal(
            CorpusSource.from_payload(payload["corpus"], fetch=artifact_cache.fetch_file).training,
            CorpusSource.from_payload(
                payload["corpus"], fetch=artifact_cache.fetch_file
            ).validation,
            tmp_path / "straight",
            causal_options(payload["options"], "cpu"),
        )
    assert run.summary["final_loss"] == pytest.approx(straight.final_loss, abs=1e-6)
    assert [e["loss"] for e in run.log if "loss" in e] == pytest.approx(
        [e["loss"] for e in straight.log if "loss" in e], abs=1e-6
    )


def test_cancel_stops_the_worker_at_its_next_step(
    training_dirs, redis_broker, workers, alice, pace, tmp_path
) -> None:
    plain = tmp_path / "kids.txt"
    plain.write_text("".join(f"look at the doggy number {n} .\n" for n in range(400)))
    corpus = corpus_import(source=plain, name="kids", owner=None)
    env = {"GYM_RUN_HOLD_DIR": str(pace.folder), "GYM_PROGRESS_EVERY_SECONDS": "0"}
    storing = workers("celery", **env)
    workers("gpu", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **env)
    pace.hold()
    run = services.training_request(
        corpus=corpus,
        name="kids-tiny",
        kind="causal",
        options={"preset": "tiny", "steps": 5000, "checkpoints": 2, "micro_batch": 2},
        user=alice,
    )
    run = pace.wait_held(run, timeout=180)
    run_cancel(run=run, user=alice)
    # The worker reads no database: the STOP file in the run's folder tells it.
    assert (local_folder(run) / "STOP").read_text() == "1\n"
    pace.release()
    deadline = time.monotonic() + 180
    while not re.search(r"runs\.store\[[^\]]*\] succeeded", storing.log.read_text()):
        assert time.monotonic() < deadline, storing.log.read_text()[-3000:]
        time.sleep(0.3)
    run.refresh_from_db()
    assert run.status == "cancelled"
    summary = causal.json.loads((local_folder(run) / causal.INFO_NAME).read_text())
    assert summary["stopped"] is True and summary["steps_done"] < 5000
    # Stopped early: no finished model was saved, and the store wrote nothing.
    assert not (local_folder(run) / "model.safetensors").exists()
    assert run.summary == {}
