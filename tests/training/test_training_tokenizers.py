"""The tokenizer of a causal model trained from scratch: byte-level BPE or Unigram trained
on the corpus, or a registered model's tokenizer as it is; on the command line, the API
and the page, with bad choices refused by name."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluations.models import LanguageModel
from evaluations.training import causal, services
from evaluations.training.models import TrainingRun
from suites.corpora.services import corpus_import
from tests.conftest import EXAMPLES
from tests.training.conftest import PAGE_FORM, assert_refused, sample_sentences, train_causal

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return sample_sentences("tree_depth")


@pytest.fixture(scope="module")
def corpus(lines, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "book.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def train(corpus: Path, out: Path, *extra: str) -> str:
    return train_causal(
        corpus, out, "--steps", "2", "--micro-batch", "4", "--checkpoints", "1", *extra
    )


def model_type(folder: Path) -> str:
    return json.loads((folder / "tokenizer.json").read_text())["model"]["type"]


def test_unigram_and_bpe_tokenizers(lines) -> None:
    unigram = causal.train_tokenizer(lines, 512, "unigram")
    assert json.loads(unigram.backend_tokenizer.to_str())["model"]["type"] == "Unigram"
    assert len(unigram) == 512
    assert (unigram.bos_token, unigram.eos_token, unigram.unk_token) == (
        "<|endoftext|>",
        "<|endoftext|>",
        "<unk>",
    )
    assert unigram.tokenize(lines[0]) == [
        "▁Wh", "o", "▁kne", "w", "▁who", "▁would", "▁be", "▁the", "re", "▁", "?",
    ]  # fmt: skip
    # A character the corpus never had is <unk>; BPE spells it in bytes.
    assert unigram("ж", add_special_tokens=False)["input_ids"][-1] == unigram.unk_token_id
    bpe = causal.train_tokenizer(lines, 512, "bpe")
    assert json.loads(bpe.backend_tokenizer.to_str())["model"]["type"] == "BPE"
    assert bpe.unk_token_id is None and len(bpe("ж")["input_ids"]) == 2


def test_the_command_trains_with_each_tokenizer(corpus, tmp_path) -> None:
    unigram = tmp_path / "unigram"
    train(corpus, unigram, "--tokenizer", "unigram")
    assert model_type(unigram) == "Unigram"
    assert json.loads((unigram / "config.json").read_text())["vocab_size"] == 512
    # The folder scores as it is: the scorer aligns the Unigram pieces by their offsets.
    results = tmp_path / "scores.json"
    call_command(
        "score", "--model", str(unigram), "--suite", str(EXAMPLES / "agreement_local.json"),
        "--out", str(results), stderr=io.StringIO(),
    )  # fmt: skip
    assert 0.0 <= json.loads(results.read_text())["results"]["accuracy"] <= 1.0
    bpe = tmp_path / "bpe"
    train(corpus, bpe)
    assert model_type(bpe) == "BPE"
    # Another model's tokenizer, as it is; the weights are new.
    borrowed = tmp_path / "borrowed"
    train(corpus, borrowed, "--tokenizer-from", str(unigram), "--seed", "3")
    assert (borrowed / "tokenizer.json").read_text() == (unigram / "tokenizer.json").read_text()
    info = json.loads((borrowed / causal.INFO_NAME).read_text())
    assert (info["options"]["tokenizer"], info["options"]["tokenizer_source"]) == (
        "model",
        str(unigram),
    )
    with pytest.raises(CommandError, match="give --tokenizer or --tokenizer-from, not both"):
        train(corpus, tmp_path / "x", "--tokenizer-from", str(unigram), "--tokenizer", "bpe")
    # WordPiece is a masked model's.
    with pytest.raises(
        CommandError, match="tokenizer 'wordpiece' is not one of a causal model's: bpe, unigram"
    ):
        train(corpus, tmp_path / "x", "--tokenizer", "wordpiece")
    assert not (tmp_path / "x").exists()


@pytest.mark.django_db
def test_runs_choose_their_tokenizer(
    training_dirs, corpus, tmp_path, alice_client, _private_broker
) -> None:
    corpus_import(source=corpus, name="book", owner=None)
    lender = tmp_path / "lender"
    train(corpus, lender, "--tokenizer", "unigram", "--vocab", "400")
    LanguageModel.objects.create(
        name="lender", display_name="Lender", source=str(lender), kind="causal"
    )
    LanguageModel.objects.create(name="kn3", display_name="KN3", source="/x.arpa", kind="ngram")
    headers = {"HTTP_X_CSRFTOKEN": alice_client.csrf_token()}

    def ask(name: str, options: dict):
        body = {"corpus": "book", "name": name, "kind": "causal", "options": options}
        return alice_client.post(
            "/api/training-runs/", json.dumps(body), content_type="application/json", **headers
        )

    refused = [
        ({"tokenizer": "wordpiece"}, "tokenizer",
         "tokenizer must be one of bpe, unigram, model, not 'wordpiece'"),
        ({"tokenizer": "model"}, "tokenizer_model",
         "tokenizer 'model' needs tokenizer_model: a registered model"),
        ({"tokenizer_model": "kn3"}, "tokenizer_model",
         "the model 'kn3' is an n-gram model; only a transformer can lend its tokenizer"),
        ({"tokenizer": "bpe", "tokenizer_model": "lender"}, "tokenizer_model",
         "tokenizer_model goes with tokenizer 'model', not 'bpe'"),
    ]  # fmt: skip
    assert_refused(ask, "m", refused)
    assert not TrainingRun.objects.exists()
    response = ask("uni", {"tokenizer": "unigram", "steps": 2})
    assert response.status_code == 201 and response.json()["options"]["tokenizer"] == "unigram"
    response = ask("lent", {"tokenizer_model": "lender", "steps": 2})
    assert response.status_code == 201, response.content
    run = TrainingRun.objects.get(model__name="lent")
    assert run.tokenizer_model is not None
    assert run.tokenizer_model.name == "lender" and run.options["tokenizer"] == "model"
    assert run.options["shape"]["vocab"] == 400  # the lent tokenizer's size
    assert services.training_payload(run)["options"]["tokenizer_source"] == str(lender)
    html = alice_client.get(f"/training/{run.pk}/").content.decode()
    assert 'Tokenizer</dt><dd>the tokenizer of <a href="/models/lender/">Lender</a>' in html
    response = alice_client.post_form("/training/new/", {**PAGE_FORM, "tokenizer": "unigram"})
    assert response.status_code == 302
    run = TrainingRun.objects.get(model__name="from-page")
    assert run.options["tokenizer"] == "unigram" and run.tokenizer_model is None
    html = alice_client.get(f"/training/{run.pk}/").content.decode()
    assert "Tokenizer</dt><dd>Unigram trained on the corpus</dd>" in html
