"""Leaderboard: heatmap cells, group means by tag, the overall score, sorting, the tag
filter, hidden and baseline models, outdated results, a constant number of queries, and
the same data as CSV and JSON. Rows are created directly in the database: the leaderboard
only reads stored accuracies."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evaluations import statistics
from evaluations.boards import leaderboard as boards
from evaluations.models import Evaluation, ItemResult, LanguageModel
from evaluations.syntaxgym import selectors
from evaluations.syntaxgym.services import evaluation_create
from evaluations.templatetags.evaluation_tags import heat
from suites.models import Suite
from suites.syntaxgym import services as suite_services
from tests.conftest import search, small_suite, suite_evaluation

pytestmark = pytest.mark.django_db

DONE = Evaluation.Status.DONE


def make_suite(name: str, *tags: str, noun: str = "dog") -> Suite:
    data = small_suite(name, **({"tags": list(tags)} if tags else {}))
    data["items"][0]["conditions"][0]["regions"][0]["content"] = f"The {noun}"
    data["items"][0]["conditions"][1]["regions"][0]["content"] = f"The {noun}"
    return suite_services.suite_import(source=data, owner=None).suite


def make_model(name: str, **fields: object) -> LanguageModel:
    fields.setdefault("display_name", name.replace("-", " ").title())
    return LanguageModel.objects.create(name=name, source=f"hub/{name}", **fields)


def done(model: LanguageModel, suite: Suite, accuracy: float | None, ties: int = 0) -> Evaluation:
    return suite_evaluation(model, suite, status=DONE, accuracy=accuracy, ties=ties)


@pytest.fixture
def board_data() -> dict[str, object]:
    """agreement: a1, a2, both (also garden-path); garden-path: both; untagged: plain."""
    a1 = make_suite("agr one", "agreement")
    a2 = make_suite("agr two", "agreement", noun="cat")
    both = make_suite("both tags", "agreement", "garden-path", noun="cow")
    plain = make_suite("plain", noun="owl")
    m1 = make_model("model-one")
    m2 = make_model("model-two")
    e = {
        "m1a1": done(m1, a1, 0.5, ties=3),
        "m1a2": done(m1, a2, 1.0, ties=2),
        "m1both": done(m1, both, 0.25),
        "m1plain": done(m1, plain, 0.75),
        "m2a1": done(m2, a1, 1.0),
    }
    # Not done: never on the leaderboard.
    evaluation_create(
        model=m2, suite=a2, content_hash=a2.content_hash, snapshot={}, status="running"
    )
    return {"a1": a1, "a2": a2, "both": both, "plain": plain, "m1": m1, "m2": m2, **e}


def test_cells_group_means_and_overall(board_data) -> None:
    d = board_data
    board = selectors.leaderboard()
    assert [g.tag for g in board.groups] == ["agreement", "garden-path", "untagged"]
    assert [s.name for s in board.groups[0].suites] == ["agr one", "agr two", "both tags"]
    assert [s.name for s in board.groups[1].suites] == ["both tags"]
    assert [s.name for s in board.suites] == ["agr one", "agr two", "both tags", "plain"]
    # Default: overall score, best first. Like for like: "agr one" is the one suite both
    # models have, so the overall score and the group means are over it alone.
    assert [s.name for s in board.compared] == ["agr one"]
    assert [(g.tag, g.compared) for g in board.groups] == [
        ("agreement", 1),
        ("garden-path", 0),
        ("untagged", 0),
    ]
    assert [r.model.name for r in board.rows] == ["model-two", "model-one"]
    m2, m1 = board.rows
    assert m1.cells[d["a1"].id] == (0.5, d["m1a1"].id)
    assert m1.group_means == {"agreement": 0.5, "garden-path": None, "untagged": None}
    assert m1.overall == 0.5
    assert (m1.covered, board.total) == (4, 4)
    assert m2.cells == {d["a1"].id: (1.0, d["m2a1"].id)}
    assert m2.overall == 1.0 and m2.covered == 1
    assert m2.group_means == {"agreement": 1.0, "garden-path": None, "untagged": None}
    # With model two gone, model one is compared on all its suites; the suite with two
    # tags counts once in the overall score.
    Evaluation.objects.filter(model=d["m2"]).delete()
    (alone,) = selectors.leaderboard().rows
    assert alone.overall == pytest.approx((0.5 + 1.0 + 0.25 + 0.75) / 4)
    assert alone.group_means == pytest.approx(
        {"agreement": (0.5 + 1.0 + 0.25) / 3, "garden-path": 0.25, "untagged": 0.75}
    )


def test_page_shows_heatmap_links_and_coverage(anon_client, board_data) -> None:
    d = board_data
    page = anon_client.get("/leaderboard/").content.decode()
    # The number is printed in the cell, over its heat colour, and links to the result.
    cell = re.search(
        rf'<td class="num lb-cell ([^"]+)"><a href="/evaluations/{d["m1a1"].id}/results/" title="([^"]*)">0.50(.*?)</a>',
        page,
    )
    assert cell and cell.group(1) == heat(0.5)
    # Its 3 ties (each a failure) are marked and counted on hover; a cell without ties is plain.
    assert cell.group(2) == "Model One on agr one: 3 tied comparisons, each counted as a failure"
    assert cell.group(3) == '<span class="lb-tie" aria-hidden="true">=</span>'
    assert re.search(
        rf'href="/evaluations/{d["m1plain"].id}/results/" title="Model One on plain">0.75</a>', page
    )
    assert "4/4" in page and "1/4" in page
    assert page.count('scope="colgroup"') == 3
    # A cell without a result links to queueing one.
    assert "/evaluations/new/?model=model-two&amp;suite=plain" in page
    assert 'aria-sort="descending"' in page


def test_heat_colours_are_light_and_distinct() -> None:
    """Cells are coloured by classes (the Content Security Policy refuses style
    attributes): a class per hundredth, each defined in gym.css, and a scale whose
    lightness keeps dark text readable."""
    assert heat(None) == "" and heat("x") == "" and heat(float("nan")) == ""
    assert heat(0) == "heat-bg share-0" and heat(0.5) == "heat-bg share-50"
    assert heat(0.504) == heat(0.5) != heat(0.51)
    assert heat(2) == heat(1) == "heat-bg share-100" and heat(-1) == heat(0)
    css = (settings.BASE_DIR / "static" / "css" / "gym.css").read_text()
    defined = re.findall(r"\.share-(\d+) \{ --share: ([.\d]+); \}", css)
    assert [(int(n), float(v)) for n, v in defined] == [(n, n / 100) for n in range(101)]
    scale = search(r"\.heat-bg \{ background: hsl\((.*)\); \}", css).group(1)
    lightness = float(search(r"(\d+)%$", scale).group(1))
    assert lightness >= 80, "dark text must stay readable on every cell"


def order(**sorting: Any) -> list[str]:
    return [r.model.name for r in selectors.leaderboard(**sorting).rows]


def test_sort_by_column_and_overall(anon_client, board_data) -> None:
    one_two, two_one = ["model-one", "model-two"], ["model-two", "model-one"]
    assert order(sort="agr one", direction="asc") == one_two
    assert order(sort="agr one", direction="desc") == two_one
    # Rows without a value go last in both directions.
    assert order(sort="plain", direction="asc") == one_two
    assert order(sort="plain", direction="desc") == one_two
    assert order(sort="overall", direction="asc") == one_two
    assert order(sort="group:agreement") == two_one
    assert order(sort="model", direction="desc") == two_one
    unknown = selectors.leaderboard(sort="no such column")
    assert (unknown.sort, unknown.direction) == ("overall", "desc")

    page = anon_client.get("/leaderboard/?sort=agr+one&dir=asc").content.decode()
    assert page.index("Model One") < page.index("Model Two")
    header = re.search(
        r'<th scope="col" class="lb-rot" aria-sort="ascending"><a href="([^"]+)"', page
    )
    assert header, "the sorted column is marked for assistive technology"
    # Its link flips the direction.
    assert header.group(1) == "?sort=agr+one&amp;dir=desc"


def test_tag_filter(anon_client, board_data) -> None:
    board = selectors.leaderboard(tag="garden-path")
    assert [g.tag for g in board.groups] == ["garden-path"]
    assert [r.model.name for r in board.rows] == ["model-one"]
    assert board.rows[0].overall == 0.25 and board.total == 1
    assert board.tags == ["agreement", "garden-path", "untagged"]
    untagged = selectors.leaderboard(tag="untagged")
    assert [s.name for s in untagged.suites] == ["plain"]
    page = anon_client.get("/leaderboard/?tag=garden-path").content.decode()
    assert "agr one" not in page and "both tags" in page
    assert '<option value="garden-path" selected>' in page
    missing = anon_client.get("/leaderboard/?tag=nope").content.decode()
    assert "No suite is tagged" in missing


def test_hidden_models_only_for_staff_and_baseline_badge(
    anon_client, dana_client, board_data
) -> None:
    secret = make_model("secret-model", is_hidden=True)
    done(secret, board_data["a1"], 0.9)
    chance = make_model("random-init", is_baseline=True, display_name="Random init")
    done(chance, board_data["a1"], 0.5)
    page = anon_client.get("/leaderboard/").content.decode()
    assert "Secret Model" not in page
    assert re.search(r"Random init</a> <span class=\"badge\"[^>]*>baseline</span>", page)
    # Every page that names the model gives the badge the same tooltip (one template).
    badge = '<span class="badge" title="A reference row: chance level (random weights)">baseline'
    assert badge in page
    assert badge in anon_client.get(f"/suites/{board_data['a1'].name}/").content.decode()
    assert badge in anon_client.get("/models/").content.decode()
    api = anon_client.get("/api/leaderboard/").json()
    assert "secret-model" not in [r["model"] for r in api["rows"]]
    assert "secret-model" not in anon_client.get("/leaderboard.csv").content.decode()
    staff_page = dana_client.get("/leaderboard/").content.decode()
    assert "Secret Model" in staff_page and ">hidden</span>" in staff_page


def test_outdated_results_left_out_but_labelled(anon_client, board_data) -> None:
    d = board_data
    changed = small_suite("agr one", tags=["agreement"])
    changed["items"][0]["conditions"][1]["regions"][1]["content"] = "were"
    suite_services.suite_import(source=changed, owner=None, replace=d["a1"])
    d["a1"].refresh_from_db()
    board = selectors.leaderboard()
    for row in board.rows:
        assert d["a1"].id not in row.cells
    assert [r.model.name for r in board.rows] == ["model-one"]

    model_page = anon_client.get("/models/model-one/").content.decode()
    assert model_page.count(">outdated</span>") == 1
    assert f"/evaluations/{d['m1a1'].id}/results/" in model_page
    scores = selectors.model_scores(d["m1"])
    assert scores.overall == pytest.approx((1.0 + 0.25 + 0.75) / 3)
    assert [s.outdated for s in scores.suites if s.suite_name == "agr one"] == [True]

    suite_page = anon_client.get("/suites/agr one/").content.decode()
    assert "Results by model" in suite_page
    assert suite_page.count(">outdated</span>") == 2  # model-one and model-two
    # A new run on the current content is on the leaderboard again, above the old one.
    fresh = done(d["m1"], d["a1"], 0.0)
    results = selectors.suite_results(d["a1"])
    assert [(r.evaluation_id, r.outdated) for r in results][0] == (fresh.id, False)
    assert selectors.leaderboard().rows[0].cells[d["a1"].id] == (0.0, fresh.id)


def test_model_page_scores_by_tag_and_suite(anon_client, board_data) -> None:
    d = board_data
    scores = selectors.model_scores(d["m2"])
    by_tag = {t.tag: (t.mean, t.covered, t.total) for t in scores.tags}
    assert by_tag == {
        "agreement": (1.0, 1, 3),
        "garden-path": (None, 0, 1),
        "untagged": (None, 0, 1),
    }
    # The running evaluation is listed with its status, without an accuracy.
    assert [(s.suite_name, s.status, s.accuracy) for s in scores.suites] == [
        ("agr one", "done", 1.0),
        ("agr two", "running", None),
    ]
    LanguageModel.objects.filter(pk=d["m2"].pk).update(
        parameter_count=124_439_808,
        description="A small GPT-2.",
        reference_url="https://example.org/m2",
    )
    page = anon_client.get("/models/model-two/").content.decode()
    for text in (
        "hub/model-two",
        "124,439,808",
        "A small GPT-2.",
        "https://example.org/m2",
        "1 / 3",
    ):
        assert text in page
    assert anon_client.get("/models/nobody/").status_code == 404
    # models/register/ is still the lead's registration page, not a model called "register".
    assert anon_client.get("/models/register/").status_code == 302


def test_empty_states(anon_client, alice_client) -> None:
    page = anon_client.get("/leaderboard/").content.decode()
    assert "There are no suites yet" in page
    make_suite("lonely")
    page = alice_client.get("/leaderboard/").content.decode()
    assert "No results yet" in page and 'href="/evaluations/new/"' in page
    suite_page = alice_client.get("/suites/lonely/").content.decode()
    assert "No model has been evaluated on this suite yet" in suite_page
    model = make_model("fresh")
    assert "No results yet" in anon_client.get(f"/models/{model.name}/").content.decode()


def _fill(models: int, suites: int, prefix: str) -> None:
    tags = ["agreement", "garden-path", "npi"]
    made = [make_suite(f"{prefix}{i:02d}", tags[i % 3], noun=f"{prefix}{i}") for i in range(suites)]
    for m in range(models):
        model = make_model(f"{prefix}-m{m:02d}", is_baseline=m == 0)
        for i, suite in enumerate(made):
            done(model, suite, ((m + i) % 5) / 4)


def _count(path: str, client) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as selector_queries:
        selectors.leaderboard()
    with CaptureQueriesContext(connection) as page_queries:
        assert client.get(path).status_code == 200
    return len(selector_queries), len(page_queries)


def test_query_count_does_not_grow(anon_client, django_assert_max_num_queries) -> None:
    _fill(2, 3, prefix="a")
    small = _count("/leaderboard/", anon_client), _count("/api/leaderboard/", anon_client)
    _fill(4, 6, prefix="b")
    assert (LanguageModel.objects.count(), Suite.objects.count()) == (6, 9)
    large = _count("/leaderboard/", anon_client), _count("/api/leaderboard/", anon_client)
    assert small == large
    with django_assert_max_num_queries(3):
        board = selectors.leaderboard()
    assert len(board.rows) == 6 and board.total == 9


def test_csv_and_api_shape(anon_client, board_data) -> None:
    d = board_data
    response = anon_client.get("/leaderboard.csv")
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="leaderboard.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == [
        "model", "display_name", "is_baseline", "overall", "suites_scored", "suites_total",
        "ties", "overall_suites", "group:agreement", "group:garden-path", "group:untagged",
        "agr one", "agr two", "both tags", "plain",
    ]  # fmt: skip
    assert rows[1] == [
        "model-two", "Model Two", "0", "1.0", "1", "4", "0", "1",
        "1.0", "", "",
        "1.0", "", "", "",
    ]  # fmt: skip
    # Over "agr one" only, the one suite both have.
    assert rows[2][:11] == ["model-one", "Model One", "0", "0.5", "4", "4", "5", "1", "0.5", "", ""]
    assert rows[2][11:] == ["0.5", "1.0", "0.25", "0.75"]
    filtered = anon_client.get("/leaderboard.csv?tag=garden-path")
    assert 'filename="leaderboard-garden-path.csv"' in filtered["Content-Disposition"]

    api = anon_client.get("/api/leaderboard/").json()
    assert set(api) == {
        "tag", "sort", "direction", "tags", "groups", "suites", "rows", "compared_suites"
    }  # fmt: skip
    assert api["compared_suites"] == ["agr one"]
    assert api["groups"][0] == {
        "tag": "agreement",
        "suites": ["agr one", "agr two", "both tags"],
        "compared_suites": ["agr one"],
    }
    assert api["groups"][1] == {
        "tag": "garden-path", "suites": ["both tags"], "compared_suites": []
    }  # fmt: skip
    assert api["suites"][2] == {
        "name": "both tags", "tags": ["agreement", "garden-path"], "compared": False
    }  # fmt: skip
    assert api["suites"][0]["compared"] is True
    m1 = api["rows"][1]
    assert m1["model"] == "model-one" and m1["is_baseline"] is False
    assert m1["overall"] == 0.5 and m1["overall_suites"] == 1
    assert (m1["covered"], m1["total"]) == (4, 4)
    assert m1["group_means"] == {"agreement": 0.5, "garden-path": None, "untagged": None}
    assert m1["scores"]["agr one"] == {"accuracy": 0.5, "evaluation": d["m1a1"].id, "ties": 3}
    assert m1["ties"] == 5 and api["rows"][0]["ties"] == 0
    tagged = anon_client.get("/api/leaderboard/?tag=untagged").json()
    assert [g["tag"] for g in tagged["groups"]] == ["untagged"]
    assert [r["model"] for r in tagged["rows"]] == ["model-one"]
    # Ties of the suites shown only: "plain" had none.
    assert tagged["rows"][0]["ties"] == 0


def test_suite_without_predictions_shows_n_a(anon_client) -> None:
    data = small_suite("no predictions")
    data["predictions"] = []
    suite = suite_services.suite_import(source=data, owner=None).suite
    model = make_model("m")
    done(model, suite, None)
    board = selectors.leaderboard()
    assert board.rows[0].overall is None and board.rows[0].covered == 0
    page = anon_client.get("/leaderboard/").content.decode()
    assert ">n/a</a>" in page


@pytest.fixture
def unequal_coverage() -> dict[str, Suite]:
    """Three models with unequal coverage. By each model's own suites C would lead
    (0.65 > B's 0.633 > A's 0.45); like for like, over s1 and s3, which all three have,
    B leads (0.8), then A (0.7), then C (0.65).

              s1 (x)  s2 (x)  s3 (y)  s4 (y)  s5 (z)
        A      0.8     0.2     0.6     0.2     0.4
        B      0.9     0.3     0.7      -      0.5
        C      0.6      -      0.7      -       -
    """
    suites = {
        name: make_suite(name, tag, noun=name)
        for name, tag in [("s1", "x"), ("s2", "x"), ("s3", "y"), ("s4", "y"), ("s5", "z")]
    }
    table = {
        "model-a": {"s1": 0.8, "s2": 0.2, "s3": 0.6, "s4": 0.2, "s5": 0.4},
        "model-b": {"s1": 0.9, "s2": 0.3, "s3": 0.7, "s5": 0.5},
        "model-c": {"s1": 0.6, "s3": 0.7},
    }
    for name, scores in table.items():
        model = make_model(name)
        for suite, accuracy in scores.items():
            done(model, suites[suite], accuracy)
    return suites


def overall(board: boards.Leaderboard) -> list[tuple[str, float | None, int]]:
    return [(r.model.name, r.overall, r.covered) for r in board.rows]


def test_overall_compares_like_with_like(unequal_coverage) -> None:
    board = selectors.leaderboard()
    assert [s.name for s in board.compared] == ["s1", "s3"]
    assert overall(board) == [
        ("model-b", pytest.approx(0.8), 4),
        ("model-a", pytest.approx(0.7), 5),
        ("model-c", pytest.approx(0.65), 2),
    ]
    # Group means follow the same rule: x over s1 (C has no s2), y over s3, z over none.
    means = {r.model.name: r.group_means for r in board.rows}
    assert means["model-a"] == pytest.approx({"x": 0.8, "y": 0.6, "z": None})
    assert means["model-c"] == pytest.approx({"x": 0.6, "y": 0.7, "z": None})
    assert [(g.tag, g.compared, len(g.suites)) for g in board.groups] == [
        ("x", 1, 2),
        ("y", 1, 2),
        ("z", 0, 1),
    ]
    # Within a tag: the models shown there, and the suites all of them have there.
    x = selectors.leaderboard(tag="x")
    assert [s.name for s in x.compared] == ["s1"]
    assert overall(x) == [("model-b", 0.9, 2), ("model-a", 0.8, 2), ("model-c", 0.6, 1)]
    z = selectors.leaderboard(tag="z")
    assert [s.name for s in z.compared] == ["s5"]
    assert overall(z) == [("model-b", 0.5, 1), ("model-a", 0.4, 1)]


def test_no_suite_in_common_means_no_overall_score(unequal_coverage) -> None:
    only_s4 = make_model("model-d")
    done(only_s4, unequal_coverage["s4"], 1.0)
    board = selectors.leaderboard()
    assert board.compared == []
    assert {r.overall for r in board.rows} == {None}
    assert [r.covered for r in board.rows] == [5, 4, 2, 1]


def test_page_says_what_the_overall_score_is_over(anon_client, unequal_coverage) -> None:
    page = anon_client.get("/leaderboard/").content.decode()
    assert "over <strong>2 of 5 suites</strong>" in page
    assert page.index("Model B") < page.index("Model A") < page.index("Model C")
    # Columns left out of the overall score are marked; each model's own count shows.
    assert page.count("lb-rot lb-out") == 3
    assert ">5/5</span>" in page and ">4/5</span>" in page and ">2/5</span>" in page
    assert "· mean over 1 of 2</span>" in page
    # The legend names every numbered column in full, the compared ones in bold.
    legend = search(r'<section class="lb-names".*?</section>', page, re.S).group(0)
    assert re.findall(r'<li value="(\d)"( class="lb-in")?><a href="/suites/(s\d)/">', legend) == [
        ("1", ' class="lb-in"', "s1"),
        ("2", "", "s2"),
        ("3", ' class="lb-in"', "s3"),
        ("4", "", "s4"),
        ("5", "", "s5"),
    ]
    tagged = anon_client.get("/leaderboard/?tag=x").content.decode()
    assert "over <strong>1 of 2 suites</strong> tagged x" in tagged
    model_d = make_model("model-d")
    done(model_d, unequal_coverage["s4"], 1.0)
    none = anon_client.get("/leaderboard/").content.decode()
    assert "<strong>No overall score:</strong>" in none


def test_csv_and_api_carry_the_compared_suites(anon_client, unequal_coverage) -> None:
    rows = list(csv.DictReader(io.StringIO(anon_client.get("/leaderboard.csv").content.decode())))
    assert [(r["model"], r["overall"], r["suites_scored"], r["overall_suites"]) for r in rows] == [
        ("model-b", repr((0.9 + 0.7) / 2), "4", "2"),
        ("model-a", repr((0.8 + 0.6) / 2), "5", "2"),
        ("model-c", repr((0.6 + 0.7) / 2), "2", "2"),
    ]
    api = anon_client.get("/api/leaderboard/?tag=z").json()
    assert api["compared_suites"] == ["s5"]
    assert [(r["model"], r["overall"], r["overall_suites"]) for r in api["rows"]] == [
        ("model-b", 0.5, 1),
        ("model-a", 0.4, 1),
    ]


def done_items(model: LanguageModel, suite: Suite, passed: Sequence[bool | None]) -> Evaluation:
    """A done evaluation whose items pass as `passed` says (item numbers from 1); its
    accuracy is the share of the evaluable ones that pass."""
    evaluable = [p for p in passed if p is not None]
    evaluation = done(model, suite, sum(evaluable) / len(evaluable) if evaluable else None)
    ItemResult.objects.bulk_create(
        ItemResult(
            evaluation=evaluation,
            item_number=n,
            position=n,
            values={},
            outcomes=[outcome],
            passed=outcome,
        )
        for n, outcome in enumerate(passed, start=1)
    )
    return evaluation


@pytest.fixture
def ranked() -> dict[str, LanguageModel]:
    """Two suites of 20 items. strong passes every item; middle passes items 1-10 of the
    first and all but item 20 of the second; close is middle but for item 10 of the first."""
    first, second = make_suite("first", noun="ant"), make_suite("second", noun="bee")
    models = {name: make_model(name) for name in ("strong", "middle", "close")}
    done_items(models["strong"], first, [True] * 20)
    done_items(models["strong"], second, [True] * 20)
    done_items(models["middle"], first, [True] * 10 + [False] * 10)
    done_items(models["middle"], second, [True] * 19 + [False])
    done_items(models["close"], first, [True] * 9 + [False] * 11)
    # An item without an outcome does not count in the test or the interval.
    done_items(models["close"], second, [True] * 18 + [None, False])
    return models


def test_adjacent_rows_tested_and_holm_adjusted(ranked) -> None:
    board = selectors.leaderboard(significance=True)
    assert [r.model.name for r in board.rows] == ["strong", "middle", "close"]
    strong, middle, close = board.rows
    assert strong.versus_above is None
    # strong vs middle: first b = 10, c = 0, p = 2/2^10 = 0.001953125; second b = 1, c = 0,
    # p = 1. Holm: 2 · 0.001953125 = 0.00390625, then max(0.0039, 1 · 1) = 1.
    assert middle.versus_above == boards.VersusAbove(suites=2, smallest_p=0.00390625)
    assert middle.versus_above.significant
    # middle vs close: first b = 1 (item 10), c = 0, p = 1; second: item 19 has no outcome
    # for close, item 20 both fail, so no disagreement, p = 1. Holm leaves [1, 1].
    assert close.versus_above == boards.VersusAbove(suites=2, smallest_p=1.0)
    assert not close.versus_above.significant
    # Off by default: nothing tested.
    assert all(r.versus_above is None for r in selectors.leaderboard().rows)


def test_significance_and_intervals_toggles_on_the_page(anon_client, ranked) -> None:
    page = anon_client.get("/leaderboard/").content.decode()
    assert "data-versus-above" not in page and 'class="lb-ci"' not in page
    page = anon_client.get("/leaderboard/?significance=1&intervals=1").content.decode()
    marks = re.findall(r'<a href="/models/(\w+)/">[^<]*</a>[^\n]*?data-versus-above', page)
    assert marks == ["close"]
    # 20 of 20 by hand: centre (1 + 0.09604) / 1.19208 = 0.91944, half 1.96 · √(3.8416 /
    # 1600) / 1.19208 = 0.08056: 0.84–1.00. 10 of 20: 0.5 ± 1.96 · √(0.0125 + 0.0024) /
    # 1.19208 = 0.5 ± 0.2007: 0.30–0.70. close's second: 18 of 19 evaluable.
    assert '<span class="lb-ci">0.84–1.00</span>' in page
    assert '<span class="lb-ci">0.30–0.70</span>' in page
    board = selectors.leaderboard(intervals=True)
    second = next(s.id for s in board.suites if s.name == "second")
    close = next(r for r in board.rows if r.model.name == "close")
    assert close.intervals[second] == pytest.approx(statistics.wilson_interval(18, 19), abs=1e-12)
    # The sort links keep the toggles, and so do the downloads (their columns follow them).
    assert "significance=1" in re.search(r'href="(\?[^"]*sort=model[^"]*)"', page)[1]  # type: ignore[index]
    assert 'href="/leaderboard.csv?intervals=1&amp;significance=1" download' in page
    # Sorted by name, the marks follow the new order: middle is now below close.
    by_name = anon_client.get("/leaderboard/?significance=1&sort=model").content.decode()
    assert re.findall(r'<a href="/models/(\w+)/">[^<]*</a>[^\n]*?data-versus-above', by_name) == [
        "middle"
    ]
    # Any other value is off, never an error.
    for query in ("significance=yes&intervals=2", "significance=&intervals=1%27"):
        response = anon_client.get(f"/leaderboard/?{query}")
        assert response.status_code == 200 and "data-versus-above" not in response.content.decode()


def test_toggles_read_a_fixed_number_of_queries(anon_client) -> None:
    path = "/leaderboard/?significance=1&intervals=1"
    _fill(2, 3, prefix="a")
    small = _count(path, anon_client)
    _fill(4, 6, prefix="b")
    large = _count(path, anon_client)
    assert small == large
    with CaptureQueriesContext(connection) as toggled:
        selectors.leaderboard(intervals=True, significance=True)
    # Three for the board, one for the intervals' counts, one for the items' outcomes.
    assert len(toggled) == 5


def test_api_gives_intervals_and_tests_when_asked(anon_client, ranked) -> None:
    plain = anon_client.get("/api/leaderboard/").json()
    assert (
        "versus_above" not in plain["rows"][0]
        and "interval" not in plain["rows"][0]["scores"]["first"]
    )
    body = anon_client.get("/api/leaderboard/?intervals=1&significance=1").json()
    rows = {r["model"]: r for r in body["rows"]}
    assert [r["model"] for r in body["rows"]] == ["strong", "middle", "close"]
    assert rows["strong"]["versus_above"] is None
    assert rows["middle"]["versus_above"] == {
        "suites": 2,
        "smallest_p": 0.00390625,
        "significant": True,
    }
    assert rows["close"]["versus_above"] == {"suites": 2, "smallest_p": 1.0, "significant": False}
    # 10 of 20 (see above): 0.5 ± 0.2007.
    assert rows["middle"]["scores"]["first"]["interval"] == pytest.approx(
        (0.2993, 0.7007), abs=1e-4
    )


def test_csv_carries_intervals_and_tests_when_asked(anon_client, ranked) -> None:
    plain = anon_client.get("/leaderboard.csv").content.decode().splitlines()[0].split(",")
    assert plain[-2:] == ["first", "second"]
    text = anon_client.get("/leaderboard.csv?intervals=1&significance=1").content.decode()
    header = text.splitlines()[0].split(",")
    assert header[header.index("second") + 1 :] == [
        "low:first",
        "low:second",
        "high:first",
        "high:second",
        "versus_above_suites",
        "versus_above_p",
        "versus_above_significant",
    ]
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(text))}
    # 20 of 20 and 10 of 20 by hand (see the page's test): 0.8389–1 and 0.2993–0.7007.
    assert float(rows["strong"]["low:first"]) == pytest.approx(0.83887, abs=1e-4)
    assert rows["strong"]["high:first"] == "1.0"
    assert float(rows["middle"]["low:first"]) == pytest.approx(0.29930, abs=1e-4)
    assert float(rows["middle"]["high:first"]) == pytest.approx(0.70070, abs=1e-4)
    assert [rows["strong"][k] for k in header[-3:]] == ["", "", ""]
    assert [rows["middle"][k] for k in header[-3:]] == ["2", "0.00390625", "1"]
    assert [rows["close"][k] for k in header[-3:]] == ["2", "1.0", "0"]
    # One toggle at a time; any other value is off.
    only = anon_client.get("/leaderboard.csv?significance=1&intervals=yes").content.decode()
    assert "low:first" not in only and "versus_above_p" in only
