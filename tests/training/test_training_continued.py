"""Continued pre-training: a registered causal model (or a model folder) trained further
on a corpus with its own tokenizer, its checkpoints and resume as from scratch; n-gram,
masked and imported models refused with a reason, on the command line and the site."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from django.core.management import CommandError
from django.utils import timezone
from safetensors.torch import load_file

from evaluations.models import LanguageModel
from evaluations.training import causal, services
from evaluations.training.models import TrainingRun
from evaluations.training.services import local_folder
from evaluations.training.worker import run_training
from suites.corpora.services import corpus_import
from tests.conftest import single_torch_thread
from tests.training.conftest import PAGE_FORM, assert_refused, book_file, train_causal

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return book_file(tmp_path_factory.mktemp("corpus"))


def train(corpus: Path, out: Path, *extra: str) -> str:
    return train_causal(
        corpus, out, "--steps", "2", "--micro-batch", "4", "--checkpoints", "2", *extra
    )


@pytest.fixture(scope="module")
def base(corpus, tmp_path_factory) -> Path:
    """A tiny model trained from scratch: the model the tests train further."""
    out = tmp_path_factory.mktemp("base") / "base"
    with single_torch_thread():
        train(corpus, out, "--preset", "tiny")
    return out


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def test_training_further_starts_from_the_weights_and_tokenizer(corpus, base, tmp_path) -> None:
    out = tmp_path / "further"
    # A learning rate too small to move the weights: the result is the base model.
    printed = train(corpus, out, "--from-model", str(base), "--lr", "1e-9")
    assert f"{out}/checkpoint-256: step 1, 256 tokens" in printed
    assert [f.name for f in sorted(out.glob("checkpoint-*"))] == [
        "checkpoint-256",
        "checkpoint-512",
    ]
    start, end = weights(base), weights(out)
    assert start.keys() == end.keys()
    for name, tensor in start.items():
        assert torch.allclose(end[name], tensor, atol=1e-6), name
    assert (out / "tokenizer.json").read_text() == (base / "tokenizer.json").read_text()
    info = json.loads((out / causal.INFO_NAME).read_text())
    assert info["options"]["base_model"] == str(base)
    assert info["options"]["shape"] == {
        "arch": "gpt2", "layers": 2, "width": 64, "heads": 2, "context": 64,
        "vocab": info["vocabulary"],
    }  # fmt: skip
    # The loss goes on from the base model's, not from ln(vocabulary) of a new model.
    fresh = json.loads((base / causal.INFO_NAME).read_text())
    assert info["log"][0]["loss"] < fresh["log"][0]["loss"]


def test_training_further_resumes_as_straight_through(corpus, base, tmp_path) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(corpus, straight, "--from-model", str(base), "--steps", "3")
    assert "stopped early: 1 steps" in train(
        corpus, resumed, "--from-model", str(base), "--steps", "3", "--stop-after-step", "1"
    )
    assert "3 steps (resumed at step 1)" in train(
        corpus, resumed, "--from-model", str(base), "--steps", "3"
    )
    expected, final = weights(straight), weights(resumed)
    for name, tensor in expected.items():
        assert torch.allclose(final[name], tensor, atol=1e-6), name


@pytest.mark.django_db
def test_the_command_refuses_what_cannot_be_trained_further(corpus, base, tmp_path) -> None:
    arpa = tmp_path / "model.arpa"
    arpa.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\t<unk>\n\n\\end\\\n")
    masked = tmp_path / "masked"
    masked.mkdir()
    (masked / "config.json").write_text(
        json.dumps({"architectures": ["BertForMaskedLM"], "model_type": "bert"})
    )
    LanguageModel.objects.create(name="kn3", display_name="KN3", source=str(arpa), kind="ngram")
    LanguageModel.objects.create(name="bert", display_name="BERT", source="x", kind="masked")
    LanguageModel.objects.create(
        name="old", display_name="Old", source="imported:old", kind="causal"
    )
    LanguageModel.objects.create(
        name="gone", display_name="Gone", source=str(base), kind="causal",
        weights_removed_at=timezone.now(),
    )  # fmt: skip
    cases = [
        ("gone", "--from-model gone: the model 'gone' has its weights removed, so it cannot "
         "be trained further"),
        ("old", "--from-model old: the model 'old' is registered only for imported results: "
         "it has no weights or tokenizer, so it cannot be trained further"),
        (str(arpa), f"--from-model {arpa}: a file, not a model folder"),
        (str(masked), "is a masked model; only a causal model can be trained further"),
        ("kn3", "--from-model kn3: the model 'kn3' is an n-gram model; only a causal "
         "transformer can be trained further"),
        ("bert", "the model 'bert' is a masked model; only a causal transformer can be"),
        ("old", "the model 'old' is registered only for imported results"),
        ("nobody", "--from-model nobody: no such folder, and no registered model"),
    ]  # fmt: skip
    for given, message in cases:
        with pytest.raises(CommandError) as caught:
            train(corpus, tmp_path / "x", "--from-model", given)
        assert message in str(caught.value), given
    with pytest.raises(CommandError, match="leave --tokenizer and --tokenizer-from out"):
        train(corpus, tmp_path / "x", "--from-model", str(base), "--tokenizer", "unigram")
    with pytest.raises(CommandError, match="--from-model fixes the shape: leave out --layers"):
        train(corpus, tmp_path / "x", "--from-model", str(base), "--layers", "3")
    with pytest.raises(CommandError, match=r"the context \(128\) is longer than the model's 64"):
        train(corpus, tmp_path / "x", "--from-model", str(base), "--context", "128")
    assert not (tmp_path / "x").exists()


@pytest.mark.django_db
def test_a_run_trains_a_registered_model_further(
    training_dirs, corpus, base, alice, alice_client, _private_broker
) -> None:
    corpus_import(source=corpus, name="book", owner=None)
    LanguageModel.objects.create(name="base", display_name="Base", source=str(base), kind="causal")
    LanguageModel.objects.create(name="kn3", display_name="KN3", source="/x.arpa", kind="ngram")
    LanguageModel.objects.create(
        name="pinned", display_name="Pinned", source="gpt2", revision="abc", kind="causal"
    )
    headers = {"HTTP_X_CSRFTOKEN": alice_client.csrf_token()}

    def ask(name: str, options: dict, kind: str = "causal"):
        body = {"corpus": "book", "name": name, "kind": kind, "options": options}
        return alice_client.post(
            "/api/training-runs/", json.dumps(body), content_type="application/json", **headers
        )

    refused: list[tuple[dict[str, Any], str, str]] = [
        ({"base_model": "kn3"}, "base_model", "the model 'kn3' is an n-gram model; only a "
         "causal transformer can be trained further"),
        ({"base_model": "nope"}, "base_model", "no registered model is named 'nope'"),
        ({"base_model": "pinned"}, "base_model", "the model 'pinned' names the hub revision "
         "'abc'; training reads a model's files without a revision, so register its folder "
         "to be trained further"),
        ({"base_model": ["base"]}, "base_model", "no registered model is named \"['base']\""),
        ({"base_model": "base", "tokenizer": "unigram"}, "tokenizer", "continued "
         "pre-training uses its base model's tokenizer: leave tokenizer and tokenizer_model out"),
        ({"base_model": "base", "width": 128}, "base_model", "the base model fixes the shape: "
         "leave width out (context may shorten it)"),
    ]  # fmt: skip
    assert_refused(ask, "further", refused)
    response = ask("further", {"base_model": "base"}, kind="ngram")
    assert response.json()["errors"][0]["message"] == (
        "base_model is an option of causal runs; an n-gram model counts words"
    )
    assert not TrainingRun.objects.exists()

    response = ask("further", {"base_model": "base", "steps": 2, "checkpoints": 2})
    assert response.status_code == 201, response.content
    assert response.json()["base_model"] == "base"
    run = TrainingRun.objects.get()
    assert run.base_model is not None
    assert run.base_model.name == "base" and run.options["base_model"] == "base"
    assert run.options["tokenizer"] == "model" and run.options["preset"] == ""
    assert run.model.description == "Base trained further on the corpus book."
    payload = services.training_payload(run)
    assert payload["options"]["base_source"] == str(base)
    results = run_training(json.loads(json.dumps(payload)), progress=lambda done, total: None)
    assert [c["tokens"] for c in results["checkpoints"]] == [512, 1024]
    out = local_folder(run)
    assert (out / "tokenizer.json").read_text() == (base / "tokenizer.json").read_text()
    assert services.training_results_store(run_id=run.pk, attempt=1, results=results)
    html = alice_client.get(f"/training/{run.pk}/").content.decode()
    assert 'Continued from</dt><dd><a href="/models/base/">Base</a>' in html
    # The page's form asks for the same.
    response = alice_client.post_form("/training/new/", {**PAGE_FORM, "base_model": "base"})
    assert response.status_code == 302
    from_page = TrainingRun.objects.get(model__name="from-page").base_model
    assert from_page is not None and from_page.name == "base"
