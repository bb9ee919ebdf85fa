"""Probing vectors in the artifact store (evaluations.probing.stored), on the local folder
and on SeaweedFS's S3: a run of a stored model extracts its vectors once and stores them
by the hash of what made them; the next run of that model on those sentences (another
probe, on any machine) fetches them through its cache and runs no model, with the same
vectors; the payload names keys, never a path; a hub model's vectors are not kept."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
from django.test import override_settings

from evaluations.language_models import registry as model_registry
from evaluations.models import LanguageModel
from evaluations.probing import services as probing_services
from evaluations.probing import stored
from evaluations.probing.worker import run_probing
from evaluations.scoring import sources
from evaluations.scoring.loading import clear_model_cache
from gym import artifact_cache, artifacts
from suites.probing.services import probing_task_import
from tests.artifacts.conftest import any_store, seaweed  # noqa: F401

pytestmark = pytest.mark.django_db

TASK_FILE = (
    Path(__file__).resolve().parents[2] / "examples" / "probing" / "subject_number_attractors.txt"
)


@pytest.fixture
def task():
    return probing_task_import(
        source=TASK_FILE, name="subject_number_attractors", owner=None, task_type="custom"
    )


def _payload(model: LanguageModel, task, probe: str = "logreg") -> dict:
    outcome = probing_services.probing_run_request(models=[model], task=task, probe=probe)
    run = outcome.runs[0]
    return json.loads(json.dumps(probing_services.probing_payload(run)))


def test_vectors_are_stored_once_and_fetched_by_key(
    any_store,  # noqa: F811
    tiny_gpt2,
    task,
    tmp_path,
    monkeypatch,
) -> None:
    key = f"models/test/{uuid.uuid4().hex}"
    artifacts.put_folder(key, tiny_gpt2)
    model = LanguageModel.objects.create(
        name="stored-gpt2", display_name="Stored", source=sources.artifact_source(key)
    )
    with override_settings(GYM_ARTIFACT_CACHE_DIR=tmp_path / "cache-a"):
        clear_model_cache()
        payload = _payload(model, task)
        assert str(tmp_path) not in json.dumps(payload) and str(tiny_gpt2) not in json.dumps(
            payload
        )
        vectors = stored.vectors_key(payload)
        assert vectors is not None and vectors.startswith("probing/vectors/")
        assert not artifacts.exists(f"{vectors}/manifest.json")
        first = run_probing(payload)
        files = {entry["path"] for entry in artifacts.read_manifest(vectors)}
        assert {"index.npy", "vectors.json", "layer-000.npy", "layer-002.npy"} <= files
        assert "vectors read from the artifact store" not in first["diagnostics"]["notes"]

    # Another machine (its own cache), another probe: the vectors come from the store,
    # and no sentence goes through the model.
    def no_forward_pass(*args, **kwargs):
        raise AssertionError("the vectors were extracted again")

    monkeypatch.setattr("evaluations.probing.run.extract_features", no_forward_pass)
    with override_settings(GYM_ARTIFACT_CACHE_DIR=tmp_path / "cache-b"):
        clear_model_cache()
        artifact_cache.FETCHES.clear()
        again = _payload(model, task, probe="mlp")
        assert stored.vectors_key(again) == vectors  # the probe does not change the vectors
        second = run_probing(again)
        assert artifact_cache.FETCHES.get(vectors) == 1
        assert "vectors read from the artifact store" in second["diagnostics"]["notes"]
        assert len(second["layers"]) == len(first["layers"])
        # The same logistic probe on the fetched vectors: the same accuracies.
        third = run_probing(_payload(model, task))
        assert [layer["te_accuracy"] for layer in third["layers"]] == [
            layer["te_accuracy"] for layer in first["layers"]
        ]
        with artifact_cache.using(vectors, folder=True) as folder:
            loaded = stored.load(folder)
            assert loaded.n_layers == len(first["layers"])
            assert loaded.n_sentences == task.instance_count
            assert np.isfinite(loaded.layer(0)).all()


def test_a_hub_models_vectors_are_not_kept(tiny_gpt2, task) -> None:
    model = model_registry.model_register(source=str(tiny_gpt2), name="tiny")
    payload = _payload(model, task)
    # A folder (or a hub id) may hold other weights tomorrow under the same name.
    assert stored.vectors_key(payload) is None
    before = artifacts.list_prefix(stored.ROOT)
    run_probing(payload)
    assert artifacts.list_prefix(stored.ROOT) == before
