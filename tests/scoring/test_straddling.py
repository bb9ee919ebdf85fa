"""Tokens that span region boundaries, with a tokenizer whose pieces cross words.

The tokenizer is trained here the way SentencePiece's `split_by_whitespace=false` trains
one, so a piece such as "that▁the▁" takes the whole of the region "the". Such a region
received no token: it has no value (never 0 bits), a prediction reading it is not
evaluable, and the run counts it; the engine, the `score` command's results file, the
stored evaluation, its result page and its JSON export all say so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluations.models import Evaluation, LanguageModel
from evaluations.scoring import (
    METRICS,
    LoadedModel,
    ScoringError,
    load_model,
    score_sentences,
    worker,
)
from evaluations.syntaxgym import exports, services
from suites.syntaxgym import services as suite_services
from tests.conftest import known, neural_model, running_evaluation
from tests.tiny_models import make_llama

# Region 4 ("the") is swallowed by the piece "that▁the▁", which starts in region 3.
SWALLOWED = ["The", "author", "that", "the", "senators", "admired", "laughed", "."]
# The same shape, every region with a token of its own.
INTACT = ["The", "author", "who", "the", "senators", "admired", "laughed", "."]


@pytest.fixture(scope="module")
def crossing_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_llama(tmp_path_factory.mktemp("llama-crossing"), split_on_spaces=False)


@pytest.fixture
def crossing(crossing_folder: Path) -> LoadedModel:
    return neural_model(str(crossing_folder))


def test_the_tokenizer_has_pieces_across_words(crossing: LoadedModel) -> None:
    text = " ".join(SWALLOWED)
    encoding = crossing.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    pieces = [text[start:end] for start, end in encoding["offset_mapping"]]
    assert "that the " in pieces


def test_a_swallowed_region_is_missing_not_zero(crossing: LoadedModel) -> None:
    swallowed, intact = score_sentences(crossing, [SWALLOWED, INTACT])
    assert swallowed.regions[3].metrics == dict.fromkeys(METRICS)
    # The piece went wholly to the region of its first character.
    piece = next(t for t in swallowed.tokens if t.text == "that▁the▁")
    assert piece.region == 2
    assert swallowed.regions[2].metrics["sum"] == pytest.approx(piece.surprisal)
    assert swallowed.diagnostics["straddling_tokens"] == 1
    assert swallowed.diagnostics["regions_without_tokens"] == 1
    assert all(r.metrics["sum"] is not None for i, r in enumerate(swallowed.regions) if i != 3)
    assert intact.diagnostics["regions_without_tokens"] == 0
    assert all(r.metrics["sum"] is not None for r in intact.regions)


def test_an_empty_region_still_sums_to_zero(crossing: LoadedModel) -> None:
    # "author▁laughed" is one piece: the empty region is 0 bits, the swallowed one missing.
    result = score_sentences(crossing, [["The", "author", "", "laughed"]])[0]
    assert [t.text for t in result.tokens] == ["▁The▁", "author▁laughed"]
    assert result.regions[2].metrics["sum"] == 0.0
    assert result.regions[3].metrics == dict.fromkeys(METRICS)
    assert result.diagnostics["regions_without_tokens"] == 1


def test_split_rule_divides_a_straddling_token_by_characters(crossing: LoadedModel) -> None:
    missing = score_sentences(crossing, [SWALLOWED])[0]
    split = score_sentences(crossing, [SWALLOWED], straddling="split")[0]
    piece = next(t for t in split.tokens if t.text == "that▁the▁")
    assert piece.surprisal is not None
    # "that" has 4 of the piece's 7 non-space characters, "the" 3.
    assert split.regions[2].metrics["sum"] == pytest.approx(piece.surprisal * 4 / 7)
    assert split.regions[3].metrics["sum"] == pytest.approx(piece.surprisal * 3 / 7)
    assert split.diagnostics["regions_without_tokens"] == 0
    # Nothing is lost or counted twice; regions the piece does not touch are unchanged.
    total = math.fsum(t.surprisal for t in split.tokens if t.surprisal is not None)
    assert math.fsum(known(r.metrics["sum"]) for r in split.regions) == pytest.approx(total)
    for index in (0, 1, 4, 5, 6, 7):
        assert split.regions[index].metrics == missing.regions[index].metrics


def test_unknown_straddling_rule_is_refused(crossing: LoadedModel) -> None:
    with pytest.raises(ScoringError, match="straddling must be one of missing, split"):
        score_sentences(crossing, [SWALLOWED], straddling="share")


@pytest.mark.parametrize("kind", ["gpt2", "llama", "bert"])
def test_whitespace_splitting_tokenizers_are_unaffected(
    kind: str, request: pytest.FixtureRequest
) -> None:
    lm = load_model(str(request.getfixturevalue(f"tiny_{kind}")))
    sentences = [SWALLOWED, INTACT, ["The", "doctor", "saw", "a", "cat"]]
    missing = score_sentences(lm, sentences)
    split = score_sentences(lm, sentences, straddling="split")
    for a, b in zip(missing, split, strict=True):
        assert a.diagnostics["regions_without_tokens"] == 0
        assert a.diagnostics["straddling_tokens"] == 0
        assert [r.metrics for r in a.regions] == [r.metrics for r in b.regions]


# --- through the score command and the site ----------------------------------------------


def suite_data() -> dict:
    def condition(name: str, words: list[str]) -> dict:
        return {
            "condition_name": name,
            "regions": [{"region_number": i + 1, "content": w} for i, w in enumerate(words)],
        }

    return {
        "meta": {"name": "swallowed determiner", "metric": "sum"},
        "region_meta": {str(i + 1): f"r{i + 1}" for i in range(len(SWALLOWED))},
        "predictions": [
            {"type": "formula", "formula": "(4;%that%) > (4;%who%)"},  # reads the lost region
            {"type": "formula", "formula": "(5;%that%) > (5;%who%)"},
        ],
        "items": [
            {
                "item_number": 1,
                "conditions": [condition("that", SWALLOWED), condition("who", INTACT)],
            }
        ],
    }


def test_score_command_reports_the_region_as_missing(crossing_folder: Path, tmp_path: Path) -> None:
    suite = tmp_path / "swallowed.json"
    suite.write_text(json.dumps(suite_data()))
    out = tmp_path / "out.json"
    call_command("score", "--model", str(crossing_folder), "--suite", str(suite), "--out", str(out))
    document = json.loads(out.read_text())
    regions = document["items"][0]["conditions"][0]["regions"]
    assert regions[3]["metric_value"] == dict.fromkeys(METRICS)
    assert regions[4]["metric_value"]["sum"] is not None
    results = document["results"]
    first, second = results["items"][0]["outcomes"]
    assert first is None and second is not None
    assert results["predictions"][0]["evaluated"] == 0
    assert results["predictions"][1]["evaluated"] == 1
    assert results["diagnostics"]["regions_without_tokens"] == 1
    assert results["diagnostics"]["straddling_tokens"] == 1
    assert results["diagnostics"]["straddling_rule"] == "missing"

    split_out = tmp_path / "split.json"
    call_command(
        "score",
        "--model",
        str(crossing_folder),
        "--suite",
        str(suite),
        "--out",
        str(split_out),
        "--straddling",
        "split",
    )
    split = json.loads(split_out.read_text())
    assert split["results"]["items"][0]["outcomes"][0] is not None
    assert split["results"]["diagnostics"]["regions_without_tokens"] == 0
    assert split["results"]["diagnostics"]["straddling_rule"] == "split"


@pytest.mark.django_db
def test_result_page_and_export_count_regions_without_tokens(
    crossing_folder: Path,
    anon_client,
) -> None:
    suite = suite_services.suite_import(source=suite_data(), owner=None).suite
    model = LanguageModel.objects.create(
        name="crossing", display_name="Crossing", source=str(crossing_folder)
    )
    evaluation = running_evaluation(model, suite)
    # The chain a worker runs, without the broker: payload -> scores -> store.
    results = worker.run_scoring(services.scoring_payload(evaluation))
    assert services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results)
    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.DONE
    assert evaluation.accuracy is None  # the only item has a prediction it cannot evaluate
    assert evaluation.diagnostics["regions_without_tokens"] == 1

    page = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert "<strong data-straddling>1</strong> token straddled a region boundary" in page
    assert (
        "<strong data-regions-without-tokens>1</strong> non-empty region received no token" in page
    )
    assert "it is missing, never 0 bits" in page

    document = json.loads(anon_client.get(f"/evaluations/{evaluation.pk}/results.json").content)
    assert document["results"]["diagnostics"]["regions_without_tokens"] == 1
    assert document["items"][0]["conditions"][0]["regions"][3]["metric_value"] == dict.fromkeys(
        METRICS
    )
    assert document == exports.results_document(evaluation)
