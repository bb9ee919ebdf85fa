"""The result page's region plot: an empty region is left out (SyntaxGym's 0 bits for its
sum is no surprisal to plot), a region without any value has no point (never 0), and
conditions are drawn with distinct markers and small horizontal offsets so that equal
means stay visible."""

from __future__ import annotations

import copy

import pytest

from evaluations import plots
from evaluations.models import LanguageModel
from evaluations.syntaxgym import selectors
from suites.syntaxgym import services as suite_services
from tests.syntaxgym.test_results_pages import TOKENS, store_done, suite_data

pytestmark = pytest.mark.django_db


def test_an_empty_region_is_left_out_not_plotted_as_zero() -> None:
    data = suite_data("empty end")
    # Item 1's matching sentence has no end region: its sum is 0 bits for predictions.
    data["items"][0]["conditions"][0]["regions"][2]["content"] = ""
    suite = suite_services.suite_import(source=data, owner=None).suite
    tokens = copy.deepcopy(TOKENS)
    tokens[1]["match"][2] = []
    model = LanguageModel.objects.create(name="m", display_name="M", source="hub/m")
    page = selectors.result_page(store_done(model, suite, tokens))
    stored = next(i for i in page.items if i.item_number == 1).conditions[0].cells[2]
    assert stored.value == 0.0  # what the predictions read
    match_end = page.plot["series"][0]["points"][2]
    # Items 2 and 3 only (3 and 2 bits): not (0 + 3 + 2) / 3.
    assert match_end["n"] == 2 and match_end["y"] == pytest.approx(2.5)


def test_a_region_without_values_has_no_point() -> None:
    values = [
        {"a": {"sum": [1.0, None]}, "b": {"sum": [1.0, None]}},
        {"a": {"sum": [3.0, None]}, "b": {"sum": [3.0, None]}},
    ]
    plot = plots.plot_data(values, ["a", "b"], [(1, "One"), (2, "Two")], "sum")
    assert [s["points"][1] for s in plot["series"]] == [None, None]
    assert plot["series"][0]["points"][0]["y"] == 2.0


def test_conditions_get_distinct_markers_and_offsets() -> None:
    values = [{c: {"sum": [2.0]} for c in "abcd"}]
    plot = plots.plot_data(values, list("abcd"), [(1, "One")], "sum")
    markers = [s["marker"] for s in plot["series"]]
    shifts = [s["offset"] for s in plot["series"]]
    # Equal means (2 bits each) still sit at four distinct places with four shapes.
    assert len(set(markers)) == 4 and len(set(shifts)) == 4
    assert shifts == sorted(shifts) and sum(shifts) == pytest.approx(0)
    assert all(s["points"][0]["y"] == 2.0 for s in plot["series"])
    assert plots.offsets(1) == [0.0]
    many = plots.offsets(12)
    assert len(set(many)) == 12 and max(many) - min(many) <= plots.OFFSET_SPAN + 1e-9


def test_without_empty_regions_keeps_other_values() -> None:
    item = {
        "conditions": [
            {"condition_name": "a", "regions": [{"content": "x"}, {"content": "  "}]},
            {"condition_name": "b", "regions": [{"content": "x"}, {"content": "y"}]},
        ]
    }
    values: dict[str, dict[str, list[float | None]]] = {
        "a": {"sum": [1.0, 0.0], "mean": [1.0, None]},
        "b": {"sum": [1.0, 0.0]},
    }
    assert plots.without_empty_regions(values, item) == {
        "a": {"sum": [1.0, None], "mean": [1.0, None]},
        "b": {"sum": [1.0, 0.0]},
    }
    assert values["a"]["sum"] == [1.0, 0.0]  # the stored values are left as they are
