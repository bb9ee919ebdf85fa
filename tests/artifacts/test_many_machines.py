"""Integration: the site in the shape of many machines. The web role (this test process),
a storing worker and two GPU workers each have a var folder, a model folder, a training
folder and an artifact cache of their own, and see none of the others'; they share only
the database, Redis and a real S3 server (SeaweedFS), and no results folder. A corpus
uploaded to the web role trains on GPU worker A; A is killed (SIGKILL) after a checkpoint
and GPU worker B resumes the training from that checkpoint in the store, and evaluates the
checkpoints; a model uploaded as a tar.gz and one uploaded as an ARPA file are checked
and scored on a suite, a minimal-pair set and a probing task. Each run is done once, and
no row or payload names a path of any role's folders."""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from evaluations.models import Evaluation, LanguageModel, PairEvaluation, ProbingRun
from evaluations.runs import lifecycle as runs
from evaluations.training import services
from evaluations.training.models import TrainingRun
from suites.syntaxgym.services import suite_import
from tests.artifacts.conftest import s3_settings
from tests.celery_harness import redelivery_env, wait_finished
from tests.conftest import EXAMPLES, token_client
from tests.scoring.test_ngram import TINY_ARPA
from tests.training.conftest import example_pair_set, example_probing_task, sample_sentences

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _role(root: Path, name: str) -> dict[str, str]:
    """A machine's own folders: nothing of another role's is on its disk."""
    home = root / name
    return {
        "GYM_VAR_DIR": str(home / "var"),
        "GYM_MODEL_DIRS": str(home / "models"),
        "GYM_TRAINING_DIR": str(home / "trained"),
        "GYM_CORPUS_DIR": str(home / "corpora"),
        "GYM_UPLOADED_MODELS_DIR": str(home / "uploads"),
        "GYM_ARTIFACT_CACHE_DIR": str(home / "cache"),
        "GYM_ARTIFACTS_DIR": str(home / "no-local-store"),
        "GYM_RUN_RESULTS_DIR": "",
    }


def _tar_gz(folder: Path) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=f"home-model/{path.name}")
    return out.getvalue()


def _upload(client: Any, data: bytes, filename: str) -> LanguageModel:
    handle = io.BytesIO(data)
    handle.name = filename
    response = client.post("/api/models/", {"file": handle})
    assert response.status_code in (201, 202), response.content
    return LanguageModel.objects.get(name=response.json()["name"])


def _ready(model: LanguageModel, timeout: float = 300) -> LanguageModel:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        model.refresh_from_db()
        if model.status != LanguageModel.Status.CHECKING:
            break
        time.sleep(0.3)
    assert model.status == LanguageModel.Status.READY, (model.status, model.reason)
    return model


def test_many_machines_share_only_the_services_and_the_store(
    seaweed, redis_broker, workers, alice, pace, settings, tmp_path, tiny_gpt2
) -> None:
    machines = tmp_path / "machines"
    store = s3_settings(seaweed, f"site-{tmp_path.name}")
    url = str(store["GYM_ARTIFACTS_URL"])
    shared = {**seaweed.settings(prefix=url.split("/", 3)[3])}
    web = _role(machines, "web")
    timing = {**redelivery_env(settings, pace), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with override_settings(
        **store,
        GYM_CORPUS_DIR=Path(web["GYM_CORPUS_DIR"]),
        GYM_TRAINING_DIR=web["GYM_TRAINING_DIR"],
        GYM_UPLOADED_MODELS_DIR=web["GYM_UPLOADED_MODELS_DIR"],
        GYM_MODEL_DIRS=[Path(web["GYM_MODEL_DIRS"])],
        GYM_ARTIFACT_CACHE_DIR=Path(web["GYM_ARTIFACT_CACHE_DIR"]),
        GYM_RUN_RESULTS_DIR="",
    ):
        workers("celery", **timing, **shared, **_role(machines, "storing"))
        gpu_a = workers("gpu", **timing, **shared, **_role(machines, "gpu-a"))
        client = token_client(alice)

        # 1. A corpus uploaded to the web role; a training run on GPU worker A.
        text = "\n".join(sample_sentences("tree_depth")) + "\n"
        response = client.post(
            "/api/corpora/?filename=book.txt", text.encode(), content_type="text/plain"
        )
        assert response.status_code == 201, response.content
        suite = suite_import(
            source=(EXAMPLES / "agreement_local.json").read_text(), owner=None
        ).suite
        pace.hold()
        response = client.post(
            "/api/training-runs/",
            json.dumps(
                {
                    "corpus": "book",
                    "name": "book-tiny",
                    "kind": "causal",
                    "options": {"preset": "tiny", "steps": 8, "checkpoints": 4, "micro_batch": 4},
                    "suites": [suite.name],
                }
            ),
            content_type="application/json",
        )
        assert response.status_code == 201, response.content
        run = TrainingRun.objects.get(pk=response.json()["id"])
        run = pace.wait_held(run, timeout=180)
        pace.release()
        deadline = time.monotonic() + 180
        while not any(c["tokens"] == 256 for c in run.checkpoints):
            assert time.monotonic() < deadline, "no checkpoint was reported"
            time.sleep(0.1)
            run.refresh_from_db()
        pace.hold()

        # 2. Worker A's machine dies; worker B, which has never seen A's folders, resumes.
        gpu_a.kill()
        pace.release()
        workers("gpu", **timing, **shared, **_role(machines, "gpu-b"))
        run = wait_finished(TrainingRun, run.pk, what="the resumed training", timeout=400)
        assert run.status == "done", run.error
        assert run.summary["resumed_from_step"] >= 1  # not from zero
        assert [c["tokens"] for c in run.checkpoints] == [256, 512, 1024, 2048]
        on_b = machines / "gpu-b" / "trained" / "book-tiny"
        assert (on_b / "model.safetensors").is_file()
        assert not (machines / "web" / "trained" / "book-tiny").exists()

        # 3. Two uploaded models, checked on B.
        home = _ready(_upload(client, _tar_gz(tiny_gpt2), "home-model.tar.gz"))
        ngram = _ready(_upload(client, TINY_ARPA.encode(), "home.arpa"))
        pairs, probing = example_pair_set(), example_probing_task()
        for kind, benchmark, models in (
            ("suite", suite, [home, ngram]),
            ("pairs", pairs, [home, ngram]),
            ("probing", probing, [home]),
        ):
            runs.kind_named(kind).request_runs(models=models, benchmarks=[benchmark], user=alice)

        # 4. Every run is done, once: the checkpoints' and the finished model's (asked for
        # by the training run), and the uploads'.
        finished = []
        for model in (Evaluation, PairEvaluation, ProbingRun):
            for pk in model.objects.values_list("pk", flat=True):
                finished.append(
                    wait_finished(model, pk, what=f"{model.__name__} {pk}", timeout=400)
                )
        assert all(r.status == "done" for r in finished), [
            (type(r).__name__, r.model.name, r.error) for r in finished if r.status != "done"
        ]
        suites_done = Evaluation.objects.values_list("model__name", flat=True)
        assert sorted(suites_done) == sorted(
            ["book-tiny", "book-tiny-256", "book-tiny-512", "book-tiny-1024", home.name, ngram.name]
        )
        assert PairEvaluation.objects.count() == 2 and ProbingRun.objects.count() == 1

        # 5. No row and no payload names a path of a machine's folders.
        for registered in LanguageModel.objects.all():
            assert str(machines) not in registered.source, registered.source
        for kind, rows in (
            ("training", TrainingRun.objects.all()),
            ("suite", Evaluation.objects.all()),
            ("pairs", PairEvaluation.objects.all()),
            ("probing", ProbingRun.objects.all()),
        ):
            for row in rows:
                payload = json.dumps(runs.kind_named(kind).build_payload(row), default=str)
                assert str(machines) not in payload, (kind, payload[:500])
        assert services.training_payload(run)["folder"] == "book-tiny"


def test_the_compose_file_has_the_same_shape() -> None:
    import yaml

    from tests.conftest import REPO

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    roles = ["web", "worker", "beat", "gpu-worker-1", "gpu-worker-2"]
    assert set(roles) | {"postgres", "redis", "objects"} == set(services)
    for role in roles:
        env = services[role]["environment"]
        assert env["GYM_ARTIFACTS_URL"].startswith("s3://"), role
        assert env["AWS_ENDPOINT_URL"] == "http://objects:8333", role
        assert env["GYM_RUN_RESULTS_DIR"] == "", role
    mounted = [
        (role, volume.split(":")[0])
        for role in roles
        for volume in services[role].get("volumes", [])
    ]
    names = [volume for _role, volume in mounted]
    assert len(names) == len(set(names)), f"a volume shared between roles: {mounted}"
    assert "gym.object_store" in services["objects"]["command"]
