"""Caps on what one request for a training run may ask of the GPU workers (issue 43,
finding 3): the model's parameters and the memory training it needs, estimated from its
shape and micro-batch before it is queued (GYM_TRAINING_MAX_PARAMETERS,
GYM_TRAINING_MAX_MEMORY_MB), bounds on each field of a shape, and the training runs one
user may have queued or running (GYM_TRAINING_MAX_ACTIVE_PER_USER, staff exempt)."""

from __future__ import annotations

import html
import json
import threading
from dataclasses import replace
from typing import Any

import pytest
import torch
from django.contrib.auth.models import User
from django.db import connection, transaction

from evaluations.models import LanguageModel
from evaluations.training import causal, services
from evaluations.training import options as causal_options
from evaluations.training.models import TrainingRun
from suites.corpora.models import Corpus
from tests.celery_harness import until
from tests.conftest import token_client
from tests.training.conftest import PAGE_FORM

PARAMETERS_CAP = "the site's cap is 1,000,000,000 (GYM_TRAINING_MAX_PARAMETERS)"


def ask(user: User, name: str, options: dict[str, Any], kind: str = "causal") -> Any:
    """POST /api/training-runs/ as `user`: a run `name` on the corpus "book"."""
    body = {"corpus": "book", "name": name, "kind": kind, "options": options}
    return token_client(user).post(
        "/api/training-runs/", json.dumps(body), content_type="application/json"
    )


def refused(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 400, response.content
    return response.json()["errors"]


def option_errors(options: dict[str, Any]) -> dict[str, str]:
    return services.training_options("causal", options)[1]


# --- the size of one run ------------------------------------------------------------------


@pytest.mark.django_db
def test_the_issue_shape_is_refused_with_the_bounds(book_corpus, alice) -> None:
    """The request of the issue was queued (201); each field over its bound is named."""
    errors = refused(ask(alice, "huge", {"width": 1_000_000, "context": 1_000_000, "heads": 1}))
    assert errors == [
        {
            "code": "invalid",
            "message": "width must be from 1 to 16,384; got 1,000,000",
            "path": "$.width",
        },
        {
            "code": "invalid",
            "message": "context must be from 1 to 32,768; got 1,000,000",
            "path": "$.context",
        },
    ]
    assert not TrainingRun.objects.exists() and not LanguageModel.objects.exists()


@pytest.mark.django_db
def test_each_field_of_a_shape_has_a_bound() -> None:
    for field, most in (
        ("layers", 256),
        ("width", 16_384),
        ("heads", 256),
        ("context", 32_768),
        ("vocab", 262_144),
    ):
        assert option_errors({"preset": "custom", field: most + 1}) == {
            field: f"{field} must be from 1 to {most:,}; got {most + 1:,}"
        }


@pytest.mark.django_db
def test_a_model_over_the_parameter_cap_is_refused(book_corpus, alice) -> None:
    """Every field within its bound, 3.4 billion parameters (58,592 MB by the estimate,
    under the memory cap): refused with the count and the cap, at `options`."""
    shape = {"preset": "custom", "layers": 16, "width": 4096, "heads": 32, "micro_batch": 1}
    assert refused(ask(alice, "big", shape)) == [
        {
            "code": "invalid",
            "message": f"the model would have 3,432,132,608 parameters; {PARAMETERS_CAP}: "
            "give fewer layers, a smaller width or a smaller vocabulary",
            "path": "$.options",
        }
    ]
    # Every field at its bound at once: both caps say by how much.
    message = option_errors(
        {"preset": "custom", "layers": 256, "width": 16_384, "heads": 256, "vocab": 262_144}
    )["options"]
    assert message.startswith(f"the model would have 829,000,024,064 parameters; {PARAMETERS_CAP}")
    assert "; training would need about 15,557,697 MB of memory" in message
    assert not TrainingRun.objects.exists()


@pytest.mark.django_db
def test_a_run_over_the_memory_cap_is_refused(book_corpus, alice) -> None:
    """GPT-2 small (124M parameters, under the parameter cap) on micro-batches of 128
    sequences of 1,024 tokens: 186 GB of activations by the estimate."""
    assert refused(ask(alice, "wide-batch", {"preset": "small", "micro_batch": 128})) == [
        {
            "code": "invalid",
            "message": "training would need about 178,731 MB of memory on its GPU (weights, "
            "gradients and optimizer state 1,899 MB; the activations of a micro-batch of "
            "128 sequences of 1,024 tokens 176,832 MB); the site's cap is 81,920 MB "
            "(GYM_TRAINING_MAX_MEMORY_MB): give a smaller micro_batch (batch_tokens keeps "
            "the tokens per step), a shorter context or a smaller model",
            "path": "$.options",
        }
    ]
    assert not TrainingRun.objects.exists()
    # The same tokens per step in micro-batches of 32 fit.
    response = ask(
        alice, "wide-batch", {"preset": "small", "micro_batch": 32, "batch_tokens": 2**17}
    )
    assert response.status_code == 201, response.content
    assert response.json()["options"]["tokens_per_step"] == 2**17


@pytest.mark.django_db
def test_every_preset_passes_on_the_defaults() -> None:
    for preset in [*causal_options.PRESETS, "custom"]:
        assert option_errors({"preset": preset}) == {}, preset
    assert option_errors({"preset": "small", "micro_batch": 32}) == {}


@pytest.mark.django_db
def test_the_size_caps_are_settings(settings, book_corpus, alice, alice_client) -> None:
    settings.GYM_TRAINING_MAX_PARAMETERS = 100_000_000
    assert option_errors({"preset": "small"}) == {
        "options": "the model would have 124,439,808 parameters; the site's cap is "
        "100,000,000 (GYM_TRAINING_MAX_PARAMETERS): give fewer layers, a smaller width or "
        "a smaller vocabulary"
    }
    assert "109,529,856 parameters" in option_errors({"preset": "small-llama"})["options"]
    assert option_errors({"preset": "tiny"}) == {}
    # The page shows it on the form, and queues nothing.
    page = alice_client.post_form("/training/new/", {**PAGE_FORM, "preset": "small"})
    assert page.status_code == 400
    assert "the model would have 124,439,808 parameters" in html.unescape(page.content.decode())
    assert not TrainingRun.objects.exists()
    settings.GYM_TRAINING_MAX_PARAMETERS = 1_000_000_000
    settings.GYM_TRAINING_MAX_MEMORY_MB = 10_000
    message = option_errors({"preset": "small"})["options"]  # micro-batches of 8
    assert message.startswith("training would need about 12,951 MB of memory")
    assert "the site's cap is 10,000 MB (GYM_TRAINING_MAX_MEMORY_MB)" in message
    assert option_errors({"preset": "small", "micro_batch": 4}) == {}


class _Tokenizer:
    """What build_model reads of a tokenizer: its size and separator."""

    bos_token_id = eos_token_id = 0

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_the_parameter_count_is_the_built_models() -> None:
    """The count from a shape is the parameters of the model training builds, less the
    padding rows of its vocabulary (the saved model's count), built without memory."""
    shapes = [
        *causal_options.PRESETS.values(),
        causal_options.ModelShape("gpt2", layers=3, width=96, heads=4, context=100, vocab=1000),
        causal_options.ModelShape("llama", layers=3, width=96, heads=4, context=100, vocab=1000),
    ]
    for shape in shapes:
        with torch.device("meta"):
            model = causal.build_model(shape, _Tokenizer(shape.vocab))
        padding = (causal_options.padded_vocab(shape.vocab) - shape.vocab) * shape.width
        built = sum(p.numel() for p in model.parameters()) - padding
        assert causal_options.parameter_count(shape) == built, shape
    assert causal_options.parameter_count(causal_options.PRESETS["small"]) == 124_439_808


def test_the_memory_estimate_meets_the_measured_peaks() -> None:
    """The peaks of eager runs on an H200 in docs/training.md (its corpus's vocabulary:
    49,943 BPE tokens, 32,000 for Llama): the estimate is within 3% of each, and above
    the compiled runs' (which keep fewer activations)."""
    small = replace(causal_options.PRESETS["small"], vocab=49_943)
    llama = replace(causal_options.PRESETS["small-llama"], vocab=32_000)
    for shape, micro_batch, peak_mib, eager in (
        (small, 16, 23_852, True),
        (llama, 32, 29_723, True),
        (small, 4, 7_264, True),
        (small, 16, 12_939, False),
        (small, 64, 43_965, False),
        (llama, 32, 16_089, False),
    ):
        estimate = causal_options.training_memory(shape, micro_batch).total / 2**20
        if eager:
            assert abs(estimate / peak_mib - 1) < 0.03, (shape.arch, micro_batch, estimate)
        else:
            assert estimate > peak_mib


# --- runs queued or running per user ------------------------------------------------------


def _cap_message(count: int, cap: int, verb: str = "asked for") -> str:
    return (
        f"alice has {count} training runs queued or running; the site's cap is {cap} per "
        f"user (GYM_TRAINING_MAX_ACTIVE_PER_USER): another can be {verb} once one of them "
        "is done, failed or cancelled"
    )


@pytest.mark.django_db
def test_a_user_has_at_most_the_cap_of_runs_queued_or_running(
    book_corpus, alice, bob, dana
) -> None:
    for n in range(3):  # the default cap
        assert ask(alice, f"alice-{n}", {"order": 3}, "ngram").status_code == 201
    assert refused(ask(alice, "alice-3", {"order": 3}, "ngram")) == [
        {"code": "too_many_runs", "message": _cap_message(3, 3)}
    ]
    assert not LanguageModel.objects.filter(name="alice-3").exists()
    # Another user's runs are their own; staff are not held to it.
    assert ask(bob, "bob-0", {"preset": "tiny"}).status_code == 201
    for n in range(4):
        assert ask(dana, f"dana-{n}", {"order": 3}, "ngram").status_code == 201
    # A running run holds its slot; a done, failed or cancelled one frees it.
    first, second, third = TrainingRun.objects.filter(requested_by=alice).order_by("pk")
    TrainingRun.objects.filter(pk=first.pk).update(status="running")
    assert refused(ask(alice, "alice-3", {"order": 3}, "ngram"))[0]["code"] == "too_many_runs"
    for run, status in ((first, "done"), (second, "failed"), (third, "cancelled")):
        TrainingRun.objects.filter(pk=run.pk).update(status=status)
        assert ask(alice, f"again-{status}", {"order": 3}, "ngram").status_code == 201
    # At the cap again, a retry of the cancelled run would make four: refused.
    response = token_client(alice).post(f"/api/training-runs/{third.pk}/retry/")
    assert response.status_code == 409
    assert response.json()["errors"][0]["message"] == _cap_message(3, 3, "retried")
    assert TrainingRun.objects.get(pk=third.pk).status == "cancelled"


@pytest.mark.django_db
def test_the_run_cap_is_a_setting_and_a_form_error(settings, book_corpus, alice_client) -> None:
    settings.GYM_TRAINING_MAX_ACTIVE_PER_USER = 1
    assert alice_client.post_form("/training/new/", PAGE_FORM).status_code == 302
    page = alice_client.post_form("/training/new/", {**PAGE_FORM, "name": "second"})
    assert page.status_code == 400
    assert _cap_message(1, 1) in html.unescape(page.content.decode())
    assert TrainingRun.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_requests_at_once_are_counted_one_after_the_other(settings, book_corpus, alice) -> None:
    """Two requests of one user at once, with a cap of 1: the second counts the first's
    run, though neither has committed when it begins. Both are held where they insert
    the run (its row's key lock on the corpus, which this test holds) until both wait on
    a lock; then they go on. PostgreSQL only: SQLite serialises write transactions."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite's write transactions run one at a time")
    settings.GYM_TRAINING_MAX_ACTIVE_PER_USER = 1
    answers: dict[str, Any] = {}

    def request(name: str) -> None:
        try:
            services.training_request(corpus=book_corpus, name=name, kind="ngram", user=alice)
            answers[name] = "queued"
        except services.TrainingRunsLimit as limit:
            answers[name] = limit
        finally:
            connection.close()

    def waiting() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
            return int(cursor.fetchone()[0])

    threads = [threading.Thread(target=request, args=(name,)) for name in ("first", "second")]
    with transaction.atomic():
        Corpus.objects.select_for_update().get(pk=book_corpus.pk)
        threads[0].start()
        until("the first request to wait", lambda: waiting() == 1, timeout=60, every=0.05)
        threads[1].start()
        until("the second request to wait", lambda: waiting() == 2, timeout=60, every=0.05)
    for thread in threads:
        thread.join(timeout=60)
    assert answers["first"] == "queued"
    assert isinstance(answers["second"], services.TrainingRunsLimit), answers
    assert TrainingRun.objects.count() == 1
