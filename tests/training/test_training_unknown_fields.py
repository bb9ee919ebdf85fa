"""A training request names only fields and options it has (issue 46, defect 8): `steps`
and `checkpoints` beside `options` were dropped and a 1,000-step run with 8 checkpoints
queued. Every unknown field or option is a 400 that names it and where it belongs, and
nothing is written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User

from evaluations.models import LanguageModel
from evaluations.training import services
from evaluations.training.models import TrainingRun
from tests.conftest import token_client


def post(user: User, body: dict[str, Any]) -> Any:
    return token_client(user).post(
        "/api/training-runs/", json.dumps(body), content_type="application/json"
    )


def errors_of(response: Any) -> dict[str, str]:
    assert response.status_code == 400, response.content
    assert not TrainingRun.objects.exists() and not LanguageModel.objects.exists()
    return {error["path"]: error["message"] for error in response.json()["errors"]}


@pytest.mark.django_db
def test_options_beside_options_are_refused_and_placed(book_corpus, alice) -> None:
    """The issue's request: steps and checkpoints at the top level."""
    body = {"corpus": "book", "name": "top", "kind": "causal", "steps": 5, "checkpoints": 2}
    assert errors_of(post(alice, body)) == {
        "$.checkpoints": "unknown field 'checkpoints': checkpoints is a training option and "
        'goes under options, as {"options": {"checkpoints": ...}}',
        "$.steps": "unknown field 'steps': steps is a training option and goes under "
        'options, as {"options": {"steps": ...}}',
    }


@pytest.mark.django_db
def test_an_unknown_top_level_field_names_the_fields(book_corpus, alice) -> None:
    found = errors_of(post(alice, {"corpus": "book", "name": "x", "kind": "causal", "epochs": 3}))
    assert list(found) == ["$.epochs"]
    assert found["$.epochs"].startswith("unknown field 'epochs': a training request's fields are")
    assert "options" in found["$.epochs"] and "pair_sets" in found["$.epochs"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "options", "path", "message"),
    [
        (
            "causal",
            {"step": 5},
            "$.options.step",
            "unknown option 'step': the options of causal runs are preset, layers",
        ),
        (
            "masked",
            {"mask_prob": 0.2},
            "$.options.mask_prob",
            "unknown option 'mask_prob': the options of masked runs are preset",
        ),
        (
            "ngram",
            {"steps": 100},
            "$.options.steps",
            "steps is an option of causal and masked runs, not of ngram runs",
        ),
        (
            "ngram",
            {"ordre": 4},
            "$.options.ordre",
            "unknown option 'ordre': the options of ngram runs are order, min_count",
        ),
    ],
)
def test_unknown_options_are_refused(book_corpus, alice, kind, options, path, message) -> None:
    found = errors_of(
        post(alice, {"corpus": "book", "name": "x", "kind": kind, "options": options})
    )
    assert list(found) == [path] and found[path].startswith(message), found


def test_every_option_a_kind_reads_is_known() -> None:
    """Each option of each kind, given alone with a valid value, raises no unknown-option
    error: the lists hold what `training_options` reads."""
    valid = {"order": 3, "min_count": 1, "memory_mb": 64, "disk_mb": 100, "preset": "custom", "arch": "gpt2", "layers": 2,
             "width": 64, "heads": 2, "context": 64, "vocab": 512, "tokenizer": "bpe",
             "steps": 10, "batch_tokens": 0, "micro_batch": 2, "learning_rate": 1e-3,
             "warmup_steps": 1, "weight_decay": 0.0, "checkpoints": 2, "keep_states": 0,
             "seed": 1, "save_every": 0, "retention": "all", "keep_last": 0,
             "mask_probability": 0.2, "whole_word_masking": True}  # fmt: skip
    for kind, names in services.OPTIONS_BY_KIND.items():
        for name in names:
            if name in ("base_model", "tokenizer_model"):
                continue  # name a registered model; refused otherwise for that reason
            assert not services.unknown_options(kind, {name: valid[name]}), (kind, name)
    assert set(valid) | {"base_model", "tokenizer_model"} == set(services.ALL_OPTIONS)


@pytest.mark.django_db
def test_a_well_formed_request_still_queues(book_corpus, alice) -> None:
    body = {"corpus": "book", "name": "ok", "kind": "ngram", "options": {"order": 2}}
    response = post(alice, body)
    assert response.status_code == 201, response.content
    assert TrainingRun.objects.get().options["order"] == 2
