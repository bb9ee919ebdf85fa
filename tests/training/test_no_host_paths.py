"""No row, payload or page of the site names a folder of a machine (issue 44): after a
training run with a checkpoint and a probing run of its models, every text and JSON
value of every row of the database, every run's payload and the run's page are scanned
for a path of this host (the test's folders, the var, training, corpus, store and cache
folders, the checkout, or any absolute path that exists here)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.db import models
from django.test import Client

from evaluations.language_models.registry import training_dir
from evaluations.models import ProbingRun
from evaluations.probing import services as probing_services
from evaluations.probing.worker import run_probing
from evaluations.runs import lifecycle as runs
from evaluations.training import services
from evaluations.training.worker import run_training
from gym import artifact_cache
from suites.corpora.services import corpus_import
from suites.probing.services import probing_task_import
from tests.conftest import EXAMPLES, REPO, single_torch_thread
from tests.training.conftest import book_file

pytestmark = pytest.mark.django_db

KINDS = {
    "evaluations.TrainingRun": "training",
    "evaluations.Evaluation": "suite",
    "evaluations.PairEvaluation": "pairs",
    "evaluations.ProbingRun": "probing",
}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _host_path(text: str, roots: list[str]) -> bool:
    if any(root in text for root in roots):
        return True
    return text.startswith("/") and len(text) > 1 and Path(text).exists()


def test_no_row_payload_or_page_names_a_host_path(training_dirs, alice, tmp_path) -> None:
    corpus = corpus_import(source=book_file(tmp_path), name="book", owner=None)
    task = probing_task_import(
        source=EXAMPLES / "probing" / "subject_number_attractors.txt",
        name="attractors",
        owner=None,
        task_type="custom",
    )
    run = services.training_request(
        corpus=corpus,
        name="Pathless",
        kind="causal",
        options={"preset": "tiny", "steps": 2, "checkpoints": 2, "micro_batch": 4},
        probing_tasks=[task],
        user=alice,
    )
    with single_torch_thread():
        results = run_training(services.training_payload(run), progress=lambda d, t: None)
        for point in results["checkpoints"]:
            services.training_checkpoint_store(run_id=run.pk, attempt=1, point=point, entries=[])
        assert services.training_results_store(run_id=run.pk, attempt=1, results=results)
        probing = list(ProbingRun.objects.all())
        assert probing, "the run's models were not sent to be probed"
        for probe in probing:
            done = run_probing(probing_services.probing_payload(probe))
            assert probing_services.probing_results_store(
                run_id=probe.pk, attempt=probe.attempt, results=done
            )
    run.refresh_from_db()
    assert run.status == "done", run.error

    roots = sorted(
        {
            str(p)
            for p in (
                tmp_path,
                settings.VAR_DIR,
                settings.GYM_CORPUS_DIR,
                settings.GYM_ARTIFACTS_DIR,
                artifact_cache.cache_dir(),
                training_dir(),
                REPO,
            )
        }
    )
    found = []
    for model in apps.get_models():
        fields = [
            f.name
            for f in model._meta.concrete_fields
            if isinstance(f, models.CharField | models.TextField | models.JSONField)
        ]
        if not fields:
            continue
        for row in model._default_manager.values("pk", *fields):
            for name in fields:
                for text in _strings(row[name]):
                    if _host_path(text, roots):
                        found.append(f"{model._meta.label} {row['pk']} {name}: {text[:200]}")
        kind = KINDS.get(model._meta.label)
        if kind is None:
            continue
        for made in model._default_manager.all():
            payload = runs.kind_named(kind).build_payload(made)  # type: ignore[arg-type]
            for text in _strings(json.loads(json.dumps(payload, default=str))):
                if _host_path(text, roots):
                    found.append(f"{kind} payload {made.pk}: {text[:200]}")
    page = Client().get(run.get_absolute_url())
    assert page.status_code == 200
    found += [f"run page: {root}" for root in roots if root in page.content.decode()]
    assert not found, "\n".join(found)
