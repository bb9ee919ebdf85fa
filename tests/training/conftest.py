"""Shared fixtures of the training tests."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from evaluations.models import LanguageModel
from evaluations.training.models import TrainingRun
from suites.corpora.models import Corpus
from suites.corpora.services import corpus_import
from suites.minimal_pairs.sets import minimal_pair_set_import
from suites.models import MinimalPairSet, ProbingTask
from suites.probing.services import probing_task_import
from tests.conftest import EXAMPLES, single_torch_thread
from tests.probing.conftest import sample

# The training page's form filled in for a tiny causal run named "from-page" on the
# corpus "book"; a test adds or changes the fields it is about.
PAGE_FORM: dict[str, Any] = {
    "corpus": "book", "name": "from-page", "kind": "causal", "order": 3, "min_count": 1,
    "preset": "tiny", "steps": 2, "batch_tokens": 0, "learning_rate": 0.001,
    "checkpoints": 2, "seed": 0, "threshold": 0.8,
}  # fmt: skip


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Tiny matrices: a second thread only adds contention on a shared machine."""
    with single_torch_thread():
        yield


@pytest.fixture
def training_dirs(settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Corpora and trained models in this test's temporary folder. A payload names the
    run's folder, not its path: the workers the test starts train in the same training
    folder because they inherit it from the environment."""
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    settings.GYM_TRAINING_DIR = tmp_path / "trained"
    monkeypatch.setenv("GYM_TRAINING_DIR", str(settings.GYM_TRAINING_DIR))


@pytest.fixture
def book_corpus(training_dirs: None, tmp_path: Path) -> Corpus:
    """The book (book_file) imported as the site's corpus "book"."""
    return corpus_import(source=book_file(tmp_path), name="book", owner=None)


def book_file(folder: Path) -> Path:
    """`folder`/book.txt: the sentences of the shared SentEval tree_depth sample, one a
    line, the training tests' corpus."""
    return sentences_file(folder / "book.txt", "tree_depth")


def sample_sentences(*tasks: str) -> list[str]:
    """The sentences (third field) of the shared SentEval samples of `tasks`, in order (the
    test is skipped where one is absent, as `sample` skips it)."""
    lines: list[str] = []
    for task in tasks:
        lines += [row.split("\t")[2] for row in sample(task).read_text().splitlines()]
    return lines


def sentences_file(path: Path, *tasks: str) -> Path:
    """`path`, written with the sentences of the shared samples of `tasks`, one a line."""
    path.write_text("\n".join(sample_sentences(*tasks)) + "\n", encoding="utf-8")
    return path


def train_causal(corpus: Path, out: Path, *options: str, kind: str = "causal") -> str:
    """`train --kind causal` (or `kind`) on `corpus` into `out` with `options` (later
    ones win): what it printed."""
    stdout = io.StringIO()
    call_command(
        "train", "--corpus", str(corpus), "--kind", kind, "--out", str(out), *options,
        stdout=stdout,
    )  # fmt: skip
    return stdout.getvalue()


def assert_refused(
    ask: Callable[[str, dict[str, Any]], Any],
    name: str,
    refused: Iterable[tuple[dict[str, Any], str, str]],
) -> None:
    """Each (options, field, message) of `refused`, asked for through the API as the run
    `name` by `ask`, is a 400 whose one error is `message` at `field`."""
    for options, field, message in refused:
        response = ask(name, options)
        assert response.status_code == 400, options
        assert response.json()["errors"] == [
            {"code": "invalid", "message": message, "path": f"$.{field}"}
        ]


def example_pair_set(name: str = "pairs") -> MinimalPairSet:
    """The example minimal-pair set, imported as the site's `name`."""
    return minimal_pair_set_import(
        data=(EXAMPLES / "minimal_pairs" / "agreement_minimal_pairs.tsv").read_text(),
        name=name,
        owner=None,
    ).pair_set


def example_probing_task(name: str = "attractors") -> ProbingTask:
    """The example probing task, imported as the site's `name`."""
    return probing_task_import(
        source=EXAMPLES / "probing" / "subject_number_attractors.txt",
        name=name,
        owner=None,
        task_type="custom",
    )


def run_with_checkpoints(
    corpus: Corpus, name: str, steps: Iterable[int], **fields: Any
) -> TrainingRun:
    """A causal training run of the model `name` (registered) on `corpus` whose
    checkpoints are at `steps` (64 tokens a step, models `<name>-<tokens>`, not
    registered), as its worker's reports would leave it; `fields` are the rest of the row."""
    made = LanguageModel.objects.create(name=name, display_name=name, source=f"/tmp/{name}")
    return TrainingRun.objects.create(
        model=made,
        corpus=corpus,
        content_hash=corpus.content_hash,
        training_kind="causal",
        checkpoints=[
            {"step": step, "tokens": 64 * step, "model": f"{name}-{64 * step}"} for step in steps
        ],
        **fields,
    )
