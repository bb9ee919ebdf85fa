"""Stored results formatted for download and for the API: the leaderboard as JSON and CSV,
one evaluation in the SyntaxGym results format and as CSV. The reads themselves are in
`selectors`; this module only lays them out."""

from __future__ import annotations

import csv
import io
from typing import Any

from evaluations import outcomes
from evaluations.models import Evaluation
from evaluations.scoring import METRICS
from evaluations.selectors import GROUP_PREFIX, Leaderboard

# --- leaderboard -----------------------------------------------------------------------


def leaderboard_data(board: Leaderboard) -> dict[str, Any]:
    """The board as plain JSON for the API."""
    names = {s.id: s.name for s in board.suites}
    return {
        "tag": board.tag,
        "sort": board.sort,
        "direction": board.direction,
        "tags": board.tags,
        "groups": [{"tag": g.tag, "suites": [s.name for s in g.suites]} for g in board.groups],
        "suites": [{"name": s.name, "tags": list(s.tags)} for s in board.suites],
        "rows": [
            {
                "model": row.model.name,
                "display_name": row.model.display_name,
                "is_baseline": row.model.is_baseline,
                "overall": row.overall,
                "covered": row.covered,
                "total": board.total,
                "ties": row.tie_total,
                "group_means": row.group_means,
                "scores": {
                    names[suite_id]: {
                        "accuracy": accuracy,
                        "evaluation": evaluation_id,
                        "ties": row.ties.get(suite_id, 0),
                    }
                    for suite_id, (accuracy, evaluation_id) in sorted(
                        row.cells.items(), key=lambda kv: names[kv[0]]
                    )
                },
            }
            for row in board.rows
        ],
    }


def leaderboard_csv(board: Leaderboard) -> str:
    """One line per model: overall, coverage, tied comparisons, each group mean, then each
    suite's accuracy."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["model", "display_name", "is_baseline", "overall", "suites_scored", "suites_total"]
        + ["ties"]
        + [f"{GROUP_PREFIX}{g.tag}" for g in board.groups]
        + [s.name for s in board.suites]
    )
    for row in board.rows:
        writer.writerow(
            [
                row.model.name,
                row.model.display_name,
                int(row.model.is_baseline),
                _number(row.overall),
                row.covered,
                board.total,
                row.tie_total,
            ]
            + [_number(row.group_means.get(g.tag)) for g in board.groups]
            + [_number(row.cells.get(s.id, (None, 0))[0]) for s in board.suites]
        )
    return out.getvalue()


def _number(value: float | None) -> str:
    return "" if value is None else repr(float(value))


# --- one evaluation's results ------------------------------------------------------------


def _item_values(evaluation: Evaluation) -> dict[int, dict[str, Any]]:
    return dict(evaluation.item_results.values_list("item_number", "values"))


def results_document(evaluation: Evaluation) -> dict[str, Any]:
    """The evaluation in the SyntaxGym results format: the suite as evaluated, with
    meta.model and a `metric_value` of all six metrics (bits) on every region. The layout
    is the one the `score` command writes (outcomes.results_document), with the run's
    accuracy and diagnostics under "results" as there."""
    document = outcomes.results_document(
        evaluation.snapshot, evaluation.model.name, _item_values(evaluation)
    )
    document["results"] = {
        "units": "bits",
        "metric": evaluation.metric,
        "accuracy": evaluation.accuracy,
        "ties": evaluation.ties,
        "accuracy_random_ties": evaluation.accuracy_random_ties,
        "diagnostics": evaluation.diagnostics or {},
        "model_info": evaluation.model_info or {},
    }
    return document


RESULTS_CSV_HEADER = [
    "item_number",
    "condition_name",
    "region_number",
    "region_name",
    "content",
    *METRICS,
]


def results_csv(evaluation: Evaluation) -> str:
    """One line per item, condition and region with the six metrics in bits."""
    document = results_document(evaluation)
    region_meta = document["region_meta"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RESULTS_CSV_HEADER)
    for item in document["items"]:
        for condition in item["conditions"]:
            for region in condition["regions"]:
                value = region["metric_value"]
                writer.writerow(
                    [
                        item["item_number"],
                        condition["condition_name"],
                        region["region_number"],
                        region_meta.get(str(region["region_number"]), ""),
                        region["content"],
                    ]
                    + [_number(value[m]) for m in METRICS]
                )
    return out.getvalue()
