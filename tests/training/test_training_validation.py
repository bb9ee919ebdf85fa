"""Validation from a second file: the training corpus is trained on whole and every line of
the second one gives the validation loss; on the command line, the API, the page and the
run page; bad files and the same text refused."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from transformers import AutoTokenizer

from evaluations.training import causal, services
from evaluations.training.data import corpus_file, with_validation_file
from evaluations.training.models import TrainingRun
from evaluations.training.services import local_folder
from evaluations.training.worker import run_training
from suites.corpora.services import corpus_import
from tests.training.conftest import PAGE_FORM, sample_sentences, sentences_file

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, Path]:
    """The training text and, from another probing sample, forty validation lines."""
    folder = tmp_path_factory.mktemp("corpora")
    held = sample_sentences("past_present")[:40]
    train, valid = sentences_file(folder / "book.txt", "tree_depth"), folder / "held.txt"
    valid.write_text("\n".join(held) + "\n", encoding="utf-8")
    return train, valid


def tokens(folder: Path, lines: list[str]) -> int:
    """Tokens of `lines` as the trainer packs them: a separator, then each line's tokens."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return sum(1 + len(tokenizer(line, add_special_tokens=False)["input_ids"]) for line in lines)


def test_a_second_file_is_the_validation_text(files) -> None:
    train, valid = files
    held = corpus_file(train)
    assert held.validation_lines == 7 and len(list(held.training())) == 703
    source = with_validation_file(held, valid)
    assert list(source.training()) == train.read_text().splitlines()
    assert list(source.validation()) == valid.read_text().splitlines()
    assert source.validation_lines == 40
    # The payload carries it to the worker.
    again = type(source).from_payload(json.loads(json.dumps(source.as_payload())))
    assert list(again.validation()) == list(source.validation()) and again == source


def test_the_command_validates_on_the_file(files, tmp_path) -> None:
    train, valid = files
    out = tmp_path / "m"
    call_command(
        "train", "--corpus", str(train), "--kind", "causal", "--steps", "1",
        "--micro-batch", "4", "--checkpoints", "1", "--out", str(out),
        "--validation-file", str(valid), stdout=io.StringIO(),
    )  # fmt: skip
    info = json.loads((out / causal.INFO_NAME).read_text())
    assert info["validation_tokens"] == tokens(out, valid.read_text().splitlines())
    assert info["training_tokens"] == tokens(out, train.read_text().splitlines())
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nnot\x00fine\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    for given, message in (
        (tmp_path / "none.txt", f"--validation-file {tmp_path / 'none.txt'}: no such file"),
        (bad, f"--validation-file {bad}, line 2: "),
        (empty, "no text: the validation file has no non-blank sequence"),
    ):
        with pytest.raises(CommandError) as caught:
            call_command(
                "train", "--corpus", str(train), "--kind", "causal", "--out",
                str(tmp_path / "x"), "--validation-file", str(given),
            )  # fmt: skip
        assert message in str(caught.value)
    assert not (tmp_path / "x").exists()


@pytest.mark.django_db
def test_a_run_validates_on_a_second_corpus(
    training_dirs, files, alice_client, _private_broker
) -> None:
    train, valid = files
    corpus_import(source=train, name="book", owner=None)
    other = corpus_import(source=valid, name="held", owner=None)
    headers = {"HTTP_X_CSRFTOKEN": alice_client.csrf_token()}

    def ask(name: str, validation: object):
        body = {
            "corpus": "book", "name": name, "kind": "causal", "validation_corpus": validation,
            "options": {"steps": 1, "checkpoints": 1, "micro_batch": 4},
        }  # fmt: skip
        return alice_client.post(
            "/api/training-runs/", json.dumps(body), content_type="application/json", **headers
        )

    response = ask("same", "book")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "code": "invalid",
            "message": "the corpus 'book' holds the same text as the training corpus; "
            "validate on other text, or leave it out to hold out a share of the lines",
            "path": "$.validation_corpus",
        }
    ]
    body = {"corpus": "book", "name": "kn", "kind": "ngram", "validation_corpus": "held"}
    response = alice_client.post(
        "/api/training-runs/", json.dumps(body), content_type="application/json", **headers
    )
    assert response.json()["errors"][0]["message"] == (
        "an n-gram run has no validation loss; a validation corpus is for causal runs"
    )
    for hostile in ("nope", ["held"], 7, "a\x00b"):
        assert ask("x", hostile).status_code == 400, hostile
    assert not TrainingRun.objects.exists()

    response = ask("checked", "held")
    assert response.status_code == 201, response.content
    assert response.json()["validation_corpus"] == "held"
    run = TrainingRun.objects.get()
    payload = services.training_payload(run)
    # Both corpora by their keys in the artifact store, no path of this host.
    assert payload["corpus"]["validation_from"]["key"] == f"corpora/{other.content_hash}"
    assert "path" not in payload["corpus"] and "path" not in payload["corpus"]["validation_from"]
    assert payload["corpus"]["validation_lines"] == 40
    results = run_training(json.loads(json.dumps(payload)), progress=lambda done, total: None)
    out = local_folder(run)
    assert results["summary"]["validation_tokens"] == tokens(out, valid.read_text().splitlines())
    html = alice_client.get(f"/training/{run.pk}/").content.decode()
    assert (
        'Validation</dt><dd>every line of the corpus <a href="/corpora/held/">held</a> '
        "(40 lines); every line of book is trained on</dd>"
    ) in html
    # Without it: the held-out lines, as before.
    assert ask("plain", None).status_code == 201
    run = TrainingRun.objects.get(model__name="plain")
    assert services.training_payload(run)["corpus"]["validation_from"] is None
    html = alice_client.get(f"/training/{run.pk}/").content.decode()
    assert "Validation</dt><dd>the 7 held-out lines of book</dd>" in html
    response = alice_client.post_form("/training/new/", {**PAGE_FORM, "validation_corpus": "held"})
    assert response.status_code == 302
    assert TrainingRun.objects.get(model__name="from-page").validation_corpus == other
