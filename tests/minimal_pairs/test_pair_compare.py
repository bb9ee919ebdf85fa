"""Two models on one minimal-pair set (the comparison page and its API: McNemar's exact
test over the pairs), and the minimal-pair leaderboard's toggles: each score's 95%
interval and each row tested against the one above it (Holm across sets), in the page,
the API and the CSV. Every statistic is checked against values worked by hand here."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence

import pytest

from evaluations import token_data
from evaluations.minimal_pairs import comparisons, selectors
from evaluations.models import LanguageModel, PairEvaluation, PairSentenceTokens
from evaluations.scoring.schema import TokenScore
from evaluations.statistics import wilson_interval
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet

pytestmark = pytest.mark.django_db

# How a pair comes out: the expected sentence more predictable (right), less (wrong), or
# exactly as predictable (a tie, which counts as wrong).
RIGHT, WRONG, TIE = "right", "wrong", "tie"
SURPRISALS = {RIGHT: (1.0, 2.0), WRONG: (2.0, 1.0), TIE: (1.5, 1.5)}


def make_set(name: str, pairs: int, owner) -> MinimalPairSet:
    """A set of `pairs` pairs of one-word sentences (w<n>a expected, w<n>b unexpected)."""
    lines = ["sentid\tpairid\tcomparison\tsentence"]
    for n in range(1, pairs + 1):
        lines.append(f"{2 * n - 1}\t{n}\texpected\tw{n}a")
        lines.append(f"{2 * n}\t{n}\tunexpected\tw{n}b")
    data = "\n".join(lines) + "\n"
    return pair_sets.minimal_pair_set_import(data=data, name=name, owner=owner).pair_set


def model_named(name: str) -> LanguageModel:
    return LanguageModel.objects.get_or_create(
        name=name, defaults={"display_name": name, "source": f"{name}-src"}
    )[0]


def run_on(
    model: LanguageModel, pair_set: MinimalPairSet, outcomes: Sequence[str]
) -> PairEvaluation:
    """A done run whose pairs (in set order) come out as `outcomes` says; its stored
    accuracy is the share right, as the store task would have written it."""
    right = sum(1 for o in outcomes if o == RIGHT)
    run = PairEvaluation.objects.create(
        model=model,
        pair_set=pair_set,
        content_hash=pair_set.content_hash,
        status=PairEvaluation.Status.DONE,
        accuracy=right / len(outcomes),
        ties=sum(1 for o in outcomes if o == TIE),
    )
    rows = []
    for n, outcome in enumerate(outcomes, start=1):
        for offset, (letter, surprisal) in enumerate(zip("ab", SURPRISALS[outcome], strict=True)):
            word = f"w{n}{letter}"
            packed = token_data.pack_tokens([TokenScore(word, 0, len(word), 0, surprisal)])
            position = 2 * (n - 1) + offset
            rows.append(
                PairSentenceTokens(
                    evaluation=run, position=position, sentid=str(position + 1), tokens=packed
                )
            )
    PairSentenceTokens.objects.bulk_create(rows)
    return run


@pytest.fixture
def two_runs(alice) -> MinimalPairSet:
    """12 pairs. A and B: both right on 1-3, only A right on 4-10 (B ties on 10), only
    B right on 11, both wrong on 12."""
    pair_set = make_set("agreement pairs", 12, alice)
    a = [RIGHT] * 10 + [WRONG, WRONG]
    b = [RIGHT] * 3 + [WRONG] * 6 + [TIE, RIGHT, WRONG]
    run_on(model_named("model-a"), pair_set, a)
    run_on(model_named("model-b"), pair_set, b)
    return pair_set


def test_mcnemar_over_pairs_by_hand(two_runs) -> None:
    comparison = comparisons.compare_pairs(two_runs, ["model-a", "model-b"])
    test = comparison.paired
    assert test is not None
    # b = 7 pairs only A gets right (the tie is wrong for B), c = 1, 3 both, 1 neither.
    assert (test.only_first, test.only_second, test.both_pass, test.both_fail) == (7, 1, 3, 1)
    assert test.items == 12
    # Exact two-sided: 2 · P(X ≤ 1), X ~ Bin(8, 1/2) = 2 · (1 + 8) / 256 = 0.0703125.
    assert test.p_value == 0.0703125
    assert not test.significant
    a, b = comparison.models
    assert (a.letter, a.passed, a.pairs, b.letter, b.passed, b.pairs) == ("A", 10, 12, "B", 4, 12)
    # 10 of 12 by hand: p̂ = 0.8333, z² = 3.8416; centre (0.8333 + 0.16007) / 1.32013 =
    # 0.75250, half 1.96 · √(0.011574 + 0.0066694) / 1.32013 = 0.20054: 0.5520–0.9530.
    assert a.interval == pytest.approx((0.55196, 0.95304), abs=1e-4)
    assert b.interval == wilson_interval(4, 12)


def test_names_left_out_with_their_reason(two_runs, alice) -> None:
    run_on(model_named("model-c"), make_set("other set", 2, alice), [RIGHT, RIGHT])
    comparison = comparisons.compare_pairs(
        two_runs, ["nobody", "model-c", "model-b", "model-a", "model-b"]
    )
    assert [m.model.name for m in comparison.models] == ["model-b", "model-a"]
    assert comparison.left_out == [
        ("nobody", "no model has this name"),
        ("model-c", "no current result on this set"),
    ]
    # B first now: the disagreement counts swap sides, the p-value stays.
    assert comparison.paired is not None
    assert (comparison.paired.only_first, comparison.paired.only_second) == (1, 7)
    third = comparisons.compare_pairs(two_runs, ["model-a", "model-b", "model-a2"])
    assert third.left_out == [("model-a2", "no model has this name")]
    model_named("model-a2")
    run_on(model_named("model-a2"), two_runs, [RIGHT] * 12)
    third = comparisons.compare_pairs(two_runs, ["model-a", "model-b", "model-a2"])
    assert third.left_out == [("model-a2", "two models are compared at a time")]


def test_compare_page_and_api(anon_client, two_runs) -> None:
    page = anon_client.get("/minimal-pairs/agreement pairs/compare/?models=model-a,model-b")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<strong data-only-first>7</strong>" in html
    assert "<strong data-only-second>1</strong>" in html
    assert "<strong data-p-value>p = 0.0703</strong>" in html
    assert "no significant difference on this set" in html
    # The accuracies name their metric: the set's own (a TSV set's: nlpscholar).
    assert 'data-metric title="the metric these accuracies compare pairs by' in html
    assert ">nlpscholar</span></th>" in html
    # The form's repeated `models` works as the comma-separated form does.
    repeated = anon_client.get(
        "/minimal-pairs/agreement pairs/compare/?models=model-a&models=model-b"
    ).content.decode()
    assert "<strong data-p-value>p = 0.0703</strong>" in repeated
    # Without models: the choices and a prompt, no test.
    bare = anon_client.get("/minimal-pairs/agreement pairs/compare/").content.decode()
    assert "data-paired-test" not in bare and "Pick two models" in bare

    body = anon_client.get("/api/minimal-pairs/agreement pairs/compare/?models=model-a,model-b")
    assert body.status_code == 200
    data = body.json()
    assert data["set"] == "agreement pairs"
    assert data["metric"] == "nlpscholar"
    assert data["paired_test"] == {
        "method": "McNemar, exact, two-sided",
        "pairs": 12,
        "only_first": 7,
        "only_second": 1,
        "both_pass": 3,
        "both_fail": 1,
        "p_value": 0.0703125,
        "significant": False,
    }
    assert [(m["letter"], m["pairs_passed"], m["pairs"]) for m in data["models"]] == [
        ("A", 10, 12),
        ("B", 4, 12),
    ]
    # Without models: the first two with a current result, by name.
    default = anon_client.get("/api/minimal-pairs/agreement pairs/compare/").json()
    assert [m["model"] for m in default["models"]] == ["model-a", "model-b"]


def test_compare_links(anon_client, two_runs) -> None:
    run = PairEvaluation.objects.get(model__name="model-a")
    result = anon_client.get(f"/pairs/evaluations/{run.pk}/").content.decode()
    assert "/minimal-pairs/agreement%20pairs/compare/?models=model-a" in result
    set_page = anon_client.get("/minimal-pairs/agreement pairs/").content.decode()
    assert "/minimal-pairs/agreement%20pairs/compare/" in set_page


def test_hostile_comparison_requests_are_4xx(anon_client, two_runs) -> None:
    api = "/api/minimal-pairs/agreement pairs/compare/"
    assert anon_client.get(f"{api}?models=model-a,%00").status_code == 400
    assert anon_client.get("/api/minimal-pairs/%00/compare/").status_code == 400
    assert anon_client.get("/api/minimal-pairs/no such set/compare/").status_code == 404
    page = "/minimal-pairs/agreement pairs/compare/"
    assert anon_client.get(f"{page}?models=%00").status_code == 400
    assert anon_client.get("/minimal-pairs/%00/compare/").status_code == 400
    many = ",".join(f"m{n}" for n in range(40))
    answer = anon_client.get(f"{api}?models={many}").json()
    assert answer["paired_test"] is None
    assert answer["left_out"][0] == {"name": "20 more", "reason": "only 20 names are read"}
    odd = anon_client.get(f"{api}?models=%ED%A0%80,{'x' * 3000}")
    assert odd.status_code in (200, 400)


@pytest.fixture
def ranked(alice) -> None:
    """Two sets: first of 20 pairs, second of 10. strong gets every pair right; middle
    gets pairs 1-10 of the first and 1-9 of the second; close is middle but for pair 10
    of the first, and ties on pair 9 of the second."""
    first, second = make_set("first", 20, alice), make_set("second", 10, alice)
    strong, middle, close = (model_named(n) for n in ("strong", "middle", "close"))
    run_on(strong, first, [RIGHT] * 20)
    run_on(strong, second, [RIGHT] * 10)
    run_on(middle, first, [RIGHT] * 10 + [WRONG] * 10)
    run_on(middle, second, [RIGHT] * 9 + [WRONG])
    run_on(close, first, [RIGHT] * 9 + [WRONG] * 11)
    run_on(close, second, [RIGHT] * 8 + [TIE, WRONG])


def test_pair_board_marks_rows_not_told_apart(ranked) -> None:
    board = selectors.pair_leaderboard(significance=True)
    assert [r.model.name for r in board.rows] == ["strong", "middle", "close"]
    strong, middle, close = board.rows
    assert strong.versus_above is None
    # strong vs middle: first b = 10, c = 0: p = 2 / 2^10 = 0.001953125; second b = 1:
    # p = 1. Holm: 2 · 0.001953125 = 0.00390625, then max(that, 1) = 1.
    assert middle.versus_above is not None
    assert (middle.versus_above.suites, middle.versus_above.smallest_p) == (2, 0.00390625)
    assert middle.versus_above.significant
    # middle vs close: first b = 1, p = 1; second b = 1 (the tie fails), p = 1.
    assert close.versus_above is not None
    assert (close.versus_above.suites, close.versus_above.smallest_p) == (2, 1.0)
    assert not close.versus_above.significant
    assert all(r.versus_above is None for r in selectors.pair_leaderboard().rows)


def test_pair_board_intervals(ranked) -> None:
    board = selectors.pair_leaderboard(intervals=True)
    first = next(s.id for s in board.suites if s.name == "first")
    middle = next(r for r in board.rows if r.model.name == "middle")
    # 10 of 20: 0.5 ± 1.96 · √(0.0125 + 0.0024010) / 1.19208 = 0.5 ± 0.20070.
    assert middle.intervals[first] == pytest.approx((0.29930, 0.70070), abs=1e-4)
    assert not selectors.pair_leaderboard().rows[0].intervals


def test_pair_board_toggles_on_page_api_and_csv(anon_client, ranked) -> None:
    page = anon_client.get("/leaderboard/?significance=1&intervals=1").content.decode()
    section = page[page.index('id="minimal-pairs"') :]
    marks = re.findall(r'<a href="/models/(\w+)/">[^<]*</a>[^\n]*?data-versus-above', section)
    assert marks == ["close"]
    # strong's 20 of 20: 0.84–1.00 (as the suites' board test works it out).
    assert '<span class="lb-ci">0.84–1.00</span>' in section
    assert "/leaderboard/minimal-pairs.csv?intervals=1&amp;significance=1" in section
    plain = anon_client.get("/leaderboard/").content.decode()
    assert "data-versus-above" not in plain[plain.index('id="minimal-pairs"') :]

    api = anon_client.get("/api/leaderboard/minimal-pairs/?intervals=1&significance=1").json()
    rows = {r["model"]: r for r in api["rows"]}
    assert rows["middle"]["versus_above"] == {
        "sets": 2,
        "smallest_p": 0.00390625,
        "significant": True,
    }
    assert rows["strong"]["versus_above"] is None
    assert rows["middle"]["scores"]["first"]["interval"] == pytest.approx(
        (0.29930, 0.70070), abs=1e-4
    )

    text = anon_client.get("/leaderboard/minimal-pairs.csv?intervals=1&significance=1")
    lines = list(csv.DictReader(io.StringIO(text.content.decode())))
    by_model = {line["model"]: line for line in lines}
    assert float(by_model["middle"]["low:first"]) == pytest.approx(0.29930, abs=1e-4)
    assert float(by_model["middle"]["high:first"]) == pytest.approx(0.70070, abs=1e-4)
    assert by_model["strong"]["high:second"] == "1.0"
    assert (by_model["strong"]["versus_above_sets"], by_model["strong"]["versus_above_p"]) == (
        "",
        "",
    )
    assert by_model["middle"]["versus_above_sets"] == "2"
    assert float(by_model["middle"]["versus_above_p"]) == 0.00390625
    assert by_model["middle"]["versus_above_significant"] == "1"
    assert by_model["close"]["versus_above_significant"] == "0"
    # Without the toggles the CSV keeps its columns.
    bare = anon_client.get("/leaderboard/minimal-pairs.csv").content.decode().splitlines()[0]
    assert "low:first" not in bare and "versus_above_p" not in bare
    # Any other value is off, never an error; a NUL anywhere in a query is a 400.
    for path in (
        "/leaderboard/",
        "/api/leaderboard/minimal-pairs/",
        "/leaderboard/minimal-pairs.csv",
    ):
        assert anon_client.get(f"{path}?significance=yes&intervals=1%27").status_code == 200
        assert anon_client.get(f"{path}?significance=%00&intervals=2").status_code == 400


def test_exact_p_matches_a_direct_binomial_sum() -> None:
    """The test's p-value against the binomial tail summed in floats here, for every
    split of up to 30 disagreements."""
    from evaluations.statistics import mcnemar_exact

    for n in range(31):
        for b in range(n + 1):
            tail = sum(math.comb(n, i) * 0.5**n for i in range(min(b, n - b) + 1))
            assert mcnemar_exact(b, n - b) == pytest.approx(min(1.0, 2 * tail), rel=1e-12)


def test_two_models_across_sets_holm_adjusted(anon_client, ranked) -> None:
    api = "/api/leaderboard/minimal-pairs/compare/"
    body = anon_client.get(f"{api}?models=strong,middle").json()
    assert [m["model"] for m in body["models"]] == ["strong", "middle"]
    first, second = body["sets"]
    # first: b = 10, c = 0: p = 2 / 1024; second: b = 1, c = 0: p = 1. Holm over two:
    # 2 · 0.001953125 = 0.00390625, then max(0.0039, 1 · 1) = 1.
    assert (first["set"], first["only_first"], first["only_second"]) == ("first", 10, 0)
    assert first["metric"] == second["metric"] == "nlpscholar"  # each set's own
    assert (first["p_value"], first["adjusted_p"], first["significant"]) == (
        0.001953125,
        0.00390625,
        True,
    )
    assert (second["set"], second["pairs"], second["p_value"], second["adjusted_p"]) == (
        "second",
        10,
        1.0,
        1.0,
    )
    assert body["significant_sets"] == 1
    # The tag groups as on the leaderboard: both sets are untagged.
    assert len(anon_client.get(f"{api}?models=strong,middle&tag=untagged").json()["sets"]) == 2
    assert anon_client.get(f"{api}?models=strong,middle&tag=nothing").json()["sets"] == []
    # A name that is no model is left out; fewer than two names is a 400 with a message.
    lonely = anon_client.get(f"{api}?models=strong,nobody").json()
    assert lonely["sets"] == [] and lonely["left_out"] == [
        {"name": "nobody", "reason": "no model has this name"}
    ]
    refused = anon_client.get(f"{api}?models=strong")
    assert refused.status_code == 400 and "two models" in refused.content.decode()
    assert anon_client.get(api).status_code == 400
    # As on one set: past the first 20 names nothing is read, and the answer says so; a
    # third model is left out.
    many = ",".join(["strong", "middle", "strong", *(f"m{n}" for n in range(25))])
    left_out = anon_client.get(f"{api}?models={many}").json()["left_out"]
    assert left_out[0] == {"name": "7 more", "reason": "only 20 names are read"}
    assert {"name": "m0", "reason": "no model has this name"} in left_out
    assert len(left_out) == 1 + 18
    assert anon_client.get(f"{api}?models=a,%00").status_code == 400
