"""Stored results formatted for download and for the API: the leaderboard as JSON and CSV,
one evaluation in the SyntaxGym results format and as CSV, and the long-format bulk export
of a selection of evaluations as CSV or Parquet. The reads themselves are in `selectors`;
this module only lays them out."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from typing import Any

from evaluations.boards.leaderboard import csv_number
from evaluations.models import ITEM_ROWS_SHOWN, Evaluation
from evaluations.runs.selectors import public_model_info
from evaluations.scoring import METRICS
from evaluations.statistics import accuracy_counts
from evaluations.syntaxgym import outcomes
from evaluations.syntaxgym.selectors import ExportedEvaluation, export_item_rows

# --- leaderboard -----------------------------------------------------------------------


# --- one evaluation's results ------------------------------------------------------------


def results_document(evaluation: Evaluation) -> dict[str, Any]:
    """The evaluation in the SyntaxGym results format: the suite as evaluated, with
    meta.model and a `metric_value` of all six metrics (bits) on every region. The layout
    is the one the `score` command writes (outcomes.results_document), with the run's
    accuracy, per-prediction tallies, per-item outcomes (one entry per prediction: true,
    false or null where a value it reads is missing) and diagnostics under "results" as
    there."""
    rows = list(
        evaluation.item_results.filter(ITEM_ROWS_SHOWN)
        .order_by("position")
        .values_list("item_number", "values", "outcomes", "passed")
    )
    document = outcomes.results_document(
        evaluation.snapshot, evaluation.model.name, {n: v for n, v, _o, _p in rows}
    )
    corrected = evaluation.word_probability != "tokens"
    document["results"] = {
        "units": "bits",
        "metric": evaluation.metric,
        # Named only for word-corrected runs, as the score command does.
        **({"word_probability": evaluation.word_probability} if corrected else {}),
        "accuracy": evaluation.accuracy,
        **accuracy_counts(p for _n, _v, _o, p in rows),
        "ties": evaluation.ties,
        "accuracy_random_ties": evaluation.accuracy_random_ties,
        "predictions": outcomes.prediction_entries(
            evaluation.prediction_results.order_by("position")
        ),
        "items": [
            {"item_number": n, "outcomes": list(o or []), "passed": p} for n, _v, o, p in rows
        ],
        "diagnostics": evaluation.diagnostics or {},
        "model_info": public_model_info(evaluation),
    }
    return document


RESULTS_CSV_HEADER = [
    "model",
    "suite",
    "item_number",
    "condition_name",
    "region_number",
    "region_name",
    "content",
    *METRICS,
]


# The `sum` column's name in a word-corrected run's CSV.
CORRECTED_SUM_COLUMN = "sum_word_corrected"


def results_csv(evaluation: Evaluation) -> str:
    """One line per item, condition and region with the six metrics in bits; the model and
    suite columns let files of several evaluations be stacked."""
    document = results_document(evaluation)
    region_meta = document["region_meta"]
    model, suite = evaluation.model.name, evaluation.suite.name
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = list(RESULTS_CSV_HEADER)
    if evaluation.word_probability == "corrected":
        # The column says which sum it holds: a file read without the run stays honest.
        header[header.index("sum")] = CORRECTED_SUM_COLUMN
    writer.writerow(header)
    for item in document["items"]:
        for condition in item["conditions"]:
            for region in condition["regions"]:
                value = region["metric_value"]
                writer.writerow(
                    [
                        model,
                        suite,
                        item["item_number"],
                        condition["condition_name"],
                        region["region_number"],
                        region_meta.get(str(region["region_number"]), ""),
                        region["content"],
                    ]
                    + [csv_number(value[m]) for m in METRICS]
                )
    return out.getvalue()


# --- long-format bulk export ---------------------------------------------------------------

# One row per item, condition, region and metric (kind "region"), then one per item and
# prediction (kind "prediction") with its outcome: tidy data for R and pandas.
LONG_COLUMNS = [
    "kind",
    "model",
    "suite",
    "item",
    "condition",
    "region",
    "region_name",
    "metric",
    "value",
    "prediction",
    "formula",
    "outcome",
]
REGION_ROW = "region"
PREDICTION_ROW = "prediction"

LongRow = tuple[
    str, str, str, int, str | None, int | None, str | None, str | None, float | None,
    int | None, str | None, bool | None,
]  # fmt: skip


def long_rows(evaluations: list[ExportedEvaluation]) -> Iterator[LongRow]:
    """The selection's rows, evaluation by evaluation, item by item; missing values are
    None (empty in CSV, null in Parquet), never 0. Predictions are numbered from 1 as on
    the result page (P1, P2, ...); an outcome is None where the prediction could not be
    evaluated on that item."""
    by_id = {e.id: e for e in evaluations}
    for evaluation_id, item, values, item_outcomes in export_item_rows(list(by_id)):
        e = by_id[evaluation_id]
        for condition, metrics in values.items():
            for metric in METRICS:
                for index, value in enumerate(metrics.get(metric) or []):
                    region = index + 1
                    yield (
                        REGION_ROW, e.model, e.suite, item, condition, region,
                        e.region_meta.get(str(region), ""), metric, value, None, None, None,
                    )  # fmt: skip
        for position, outcome in enumerate(item_outcomes):
            formula = e.formulas[position] if position < len(e.formulas) else ""
            yield (
                PREDICTION_ROW, e.model, e.suite, item, None, None, None, None, None,
                position + 1, formula, outcome,
            )  # fmt: skip


class _Line:
    """A file-like object whose write returns the text, so csv.writer yields lines."""

    def write(self, text: str) -> str:
        return text


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        # R's read.csv and pandas both read these as logicals.
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return value


def long_csv(evaluations: list[ExportedEvaluation]) -> Iterator[str]:
    """The long format as CSV text, line by line (for a streaming response)."""
    writer = csv.writer(_Line(), lineterminator="\n")
    yield writer.writerow(LONG_COLUMNS)
    for row in long_rows(evaluations):
        yield writer.writerow([_cell(v) for v in row])


def long_parquet(evaluations: list[ExportedEvaluation], *, batch_rows: int = 50_000) -> bytes:
    """The long format as one Parquet file with typed columns (integers, float64 values in
    bits, a nullable boolean outcome), written a row group at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("kind", pa.string()),
            ("model", pa.string()),
            ("suite", pa.string()),
            ("item", pa.int64()),
            ("condition", pa.string()),
            ("region", pa.int64()),
            ("region_name", pa.string()),
            ("metric", pa.string()),
            ("value", pa.float64()),
            ("prediction", pa.int64()),
            ("formula", pa.string()),
            ("outcome", pa.bool_()),
        ]
    )
    out = io.BytesIO()
    with pq.ParquetWriter(out, schema) as writer:
        batch: list[LongRow] = []

        def flush() -> None:
            columns: list[Sequence[Any]] = (
                list(zip(*batch, strict=True)) if batch else [[] for _ in LONG_COLUMNS]
            )
            writer.write_table(
                pa.Table.from_arrays(
                    [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                    schema=schema,
                )
            )
            batch.clear()

        for row in long_rows(evaluations):
            batch.append(row)
            if len(batch) >= batch_rows:
                flush()
        if batch:
            flush()
    return out.getvalue()
