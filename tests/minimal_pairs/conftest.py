"""Shared data and fixtures of the minimal-pair tests (modules with another set or model
define their own `pair_set` or `model`)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluations.models import LanguageModel
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet
from tests.conftest import EXAMPLES, single_torch_thread

# The project's example set, the data of the tests that compare a run with the commands.
EXAMPLE = EXAMPLES / "minimal_pairs" / "agreement_minimal_pairs.tsv"

# Two pairs, one with a region of interest.
DATA = (
    "sentid\tpairid\tcomparison\tsentence\tROI\tcond\n"
    "1\t1\texpected\tthe keys are here\t2\tagr\n"
    "2\t1\tunexpected\tthe keys is here\t2\tagr\n"
    "3\t2\texpected\tno dog barks\t\tnpi\n"
    "4\t2\tunexpected\ta dog barks\t\tnpi\n"
)


@pytest.fixture
def pair_set(alice) -> MinimalPairSet:
    return pair_sets.minimal_pair_set_import(data=DATA, name="small", owner=alice).pair_set


@pytest.fixture
def model() -> LanguageModel:
    return LanguageModel.objects.create(name="tiny", display_name="Tiny", source="tiny/model")


@pytest.fixture
def example_pairs() -> MinimalPairSet:
    """The example set (EXAMPLE) imported as the site's set "agreement"."""
    return pair_sets.minimal_pair_set_import(
        data=EXAMPLE.read_bytes(), name="agreement", owner=None
    ).pair_set


def evaluate_and_analyze(
    source: Path,
    folder: Path,
    name: str,
    *,
    flags: tuple[str, ...] = (),
    analyze: tuple[str, ...] = (),
) -> tuple[Path, Path]:
    """`minimal_pairs evaluate` of the model at `source` on EXAMPLE (one thread, as the
    worker; `flags` its options) then `analyze` (`analyze` its options): the token table
    and the results, `folder`/`name`.tsv and `folder`/`name`-results.tsv."""
    pred, results = folder / f"{name}.tsv", folder / f"{name}-results.tsv"
    with single_torch_thread():
        call_command("minimal_pairs", "evaluate", "--model", str(source), "--data", str(EXAMPLE),
                     "--out", str(pred), *flags, stdout=StringIO(), stderr=StringIO())  # fmt: skip
    call_command("minimal_pairs", "analyze", "--pred", str(pred), "--data", str(EXAMPLE),
                 "--out", str(results), *analyze, stdout=StringIO(), stderr=StringIO())  # fmt: skip
    return pred, results
