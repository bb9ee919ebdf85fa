"""The training form: each kind's options in a fieldset of its own (shown by kind with
JavaScript, all with their legends without it), the custom shape's fields, and micro-batch,
warm-up and weight decay reachable from the page as from the command."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from evaluations.training.forms import GROUPS, TrainingRequestForm
from evaluations.training.models import TrainingRun
from tests.training.conftest import PAGE_FORM, example_probing_task

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def corpus(book_corpus):
    return book_corpus


@pytest.fixture
def attractor_task():
    return example_probing_task()


def test_every_field_is_in_one_group() -> None:
    grouped = [name for group in GROUPS for name in group.fields]
    assert sorted(grouped) == sorted(TrainingRequestForm.base_fields)
    assert len(grouped) == len(set(grouped))


def test_the_page_groups_the_fields_by_kind(alice_client) -> None:
    html = alice_client.get("/training/new/").content.decode()
    kinds = re.findall(r'<fieldset class="form-group"(?: data-kind="([^"]*)")?', html)
    assert kinds == [
        "",
        "ngram",
        "causal masked",
        "masked",
        "causal masked",
        "causal masked",
        "causal masked",
        "",
    ]
    assert '<fieldset class="form-group" data-kind="causal masked" data-preset="custom">' in html
    for legend in ("n-gram model", "Custom shape", "Optimisation", "Checkpoints"):
        assert f"<legend>{legend} " in html or f"<legend>{legend}<" in html
    for field in ("layers", "width", "heads", "context", "vocab", "arch", "micro_batch"):
        assert f'name="{field}"' in html
    assert 'name="warmup_steps"' in html and 'name="weight_decay"' in html
    # Probing needs hidden states: the field is for causal models only.
    assert '<p data-kind="causal masked"><label for="id_probing_tasks">' in html
    # A strict Content-Security-Policy: no inline script or style.
    assert "style=" not in html
    scripts = re.findall(r"<script([^>]*)>", html)
    assert scripts and all("src=" in attrs for attrs in scripts), scripts


def test_the_custom_shape_and_the_loop_options(alice_client) -> None:
    form = {
        **PAGE_FORM,
        "preset": "custom",
        "layers": 1,
        "width": 32,
        "heads": 2,
        "context": 16,
        "vocab": 300,
        "arch": "llama",
        "micro_batch": 2,
        "warmup_steps": 1,
        "weight_decay": 0.05,
    }
    response = alice_client.post_form("/training/new/", form)
    assert response.status_code == 302, response.content.decode()[-3000:]
    options = TrainingRun.objects.get().options
    assert options["shape"] == {
        "arch": "llama", "layers": 1, "width": 32, "heads": 2, "context": 16, "vocab": 300,
    }  # fmt: skip
    assert (options["micro_batch"], options["warmup_steps"]) == (2, 1)
    assert options["weight_decay"] == 0.05
    # Blank: the command's defaults.
    blank = {key: "" for key in ("micro_batch", "warmup_steps", "weight_decay")}
    alice_client.post_form("/training/new/", {**PAGE_FORM, **blank, "name": "defaults"})
    options = TrainingRun.objects.get(model__name="defaults").options
    assert (options["micro_batch"], options["warmup_steps"], options["weight_decay"]) == (
        8,
        -1,
        0.1,
    )


def test_fields_of_another_kind_or_preset_are_not_read(alice_client, attractor_task) -> None:
    """A page with JavaScript hides them, but still sends them."""
    hidden = {
        **PAGE_FORM,
        "preset": "tiny",
        "layers": 999_999,  # the custom shape's, under the tiny preset
        "arch": "llama",
        "steps": "many",
    }
    response = alice_client.post_form("/training/new/", {**hidden, "steps": 2})
    assert response.status_code == 302
    assert TrainingRun.objects.get().options["shape"]["layers"] == 2
    ngram = {
        **hidden,
        "name": "words",
        "kind": "ngram",
        "validation_corpus": "book",
        "probing_tasks": [attractor_task.name],
    }
    response = alice_client.post_form("/training/new/", ngram)
    assert response.status_code == 302, response.content.decode()[-3000:]
    run = TrainingRun.objects.get(model__name="words")
    assert run.options == {"order": 3, "min_count": 1}  # no bounds given, none stored
    assert run.validation_corpus is None and not run.probing_tasks.exists()


def test_weight_decay_in_the_api(alice_client) -> None:
    headers = {"HTTP_X_CSRFTOKEN": alice_client.csrf_token()}
    body = {"corpus": "book", "name": "decayed", "kind": "causal"}

    def ask(name: str, options: dict) -> Any:
        return alice_client.post(
            "/api/training-runs/",
            json.dumps({**body, "name": name, "options": options}),
            content_type="application/json",
            **headers,
        )

    response = ask("decayed", {"preset": "tiny", "steps": 2, "weight_decay": 0})
    assert response.status_code == 201, response.content
    assert response.json()["options"]["weight_decay"] == 0.0
    response = ask("too-much", {"preset": "tiny", "steps": 2, "weight_decay": 2})
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "code": "invalid",
            "message": "weight_decay must be from 0 to 1; got 2",
            "path": "$.weight_decay",
        }
    ]
