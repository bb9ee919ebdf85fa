"""Downloads of probing results: one run as the `probe` command's JSON document and as a
CSV of one row per layer; the probing leaderboard as JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from evaluations.models import ProbingRun
from evaluations.probing.controls import seeds_of
from evaluations.probing.selectors import BOARD_BASELINES, ProbingBoard, human_accuracy, layer_rows
from evaluations.runs.selectors import public_model_info


def run_document(run: ProbingRun) -> dict[str, Any]:
    """The run as `manage.py probe` writes it for one task (same keys, same numbers),
    the task's human baseline row as it stands (`human`; the command has none) and the
    frequency source the run asked for (`frequency_source`; the command's is the CMU)."""
    layers = layer_rows(run)
    best = next((row for row in layers if row["layer"] == run.best_layer), None)
    diagnostics = dict(run.diagnostics or {})
    control = diagnostics.pop("control", None)
    return {
        "task": run.task_info,
        "model": public_model_info(run),
        "pooling": run.pooling,
        "probe": run.probe,
        "seeds": seeds_of(run.seeds),
        "mdl": run.mdl,
        "baselines": run.baselines,
        # Which unigram counts the frequency baseline was asked to use.
        "frequency_source": run.frequency_source,
        "control": control,
        "layers": layers,
        "best_layer": run.best_layer,
        "best": best,
        "best_selectivity": run.best_selectivity,
        "confusion": run.confusion,
        "diagnostics": diagnostics,
        # People's answers on the task now (not stored with the run): see human_summary.
        "human": human_accuracy(run.task),
    }


RUN_CSV_HEADER = [
    "model",
    "task",
    "pooling",
    "probe",
    "layer",
    "va_accuracy",
    "te_accuracy",
    "chosen_on_va",
    "hyperparameters",
    "majority_te_accuracy",
    "length_te_accuracy",
    "frequency_te_accuracy",
    "frequency_source",
    "frequency_fell_back",
    "seeds",
    "va_sd",
    "te_sd",
    "control_te_accuracy",
    "selectivity",
    "mdl_bits",
    "mdl_compression",
    "human_te_accuracy",
    "human_interval_low",
    "human_interval_high",
    "human_people",
    "human_kappa",
    "human_kappa_method",
    "human_kappa_sentences",
]


def human_columns(human: dict[str, Any] | None) -> list[object]:
    """The human row in seven CSV fields (empty before anyone finished): accuracy, its
    interval, how many people, kappa, which kappa and over how many sentences."""
    if not human:
        return [""] * 7
    low, high = human["interval"] or (None, None)
    agreement = human["agreement"] or {}
    return [
        _number(human["accuracy"]),
        _number(low),
        _number(high),
        human["people"],
        _number(agreement.get("kappa")),
        agreement.get("method", ""),
        agreement.get("sentences", ""),
    ]


def _number(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def run_csv(run: ProbingRun) -> str:
    """One row per layer; the baselines repeat on every row so that files of several
    runs stack."""
    base = run.baselines or {}
    majority = (base.get("majority") or {}).get("te_accuracy")
    length = (base.get("length") or {}).get("te_accuracy")
    frequency = (base.get("frequency") or {}).get("te_accuracy")
    fell_back = (base.get("frequency") or {}).get("fell_back")
    human = human_columns(human_accuracy(run.task))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RUN_CSV_HEADER)
    for row in layer_rows(run):
        writer.writerow(
            [
                run.model.name,
                run.task.name,
                run.pooling,
                run.probe,
                row["layer"],
                _number(row["va_accuracy"]),
                _number(row["te_accuracy"]),
                int(row["layer"] == run.best_layer),
                json.dumps(row["hyperparameters"], sort_keys=True),
                _number(majority),
                _number(length),
                _number(frequency),
                run.frequency_source,
                "" if fell_back is None else fell_back,
                run.seeds,
                _number(row.get("va_std")),
                _number(row.get("te_std")),
                _number((row.get("control") or {}).get("te_accuracy")),
                _number(row.get("selectivity")),
                _number((row.get("mdl") or {}).get("bits")),
                _number((row.get("mdl") or {}).get("compression")),
                *human,
            ]
        )
    return out.getvalue()


def board_data(board: ProbingBoard) -> dict[str, Any]:
    """The board as plain JSON; on a board of one training run's checkpoints, `training`
    (its id) and each row's `tokens`."""
    data: dict[str, Any] = {
        "pooling": board.pooling,
        "probe": board.probe,
        "metric": "te accuracy at the layer chosen on va",
        "tasks": [{"name": t.name, "type": t.task_type} for t in board.tasks],
        "baselines": {
            t.name: board.baselines.get(t.pk, {"majority": None, "length": None, "frequency": None})
            for t in board.tasks
        },
        # People's accuracy, its interval, each annotator and their agreement (None
        # before anyone labelled every sentence of the task's te sample).
        "human": {t.name: board.human.get(t.pk) for t in board.tasks},
        "rows": [
            {
                "model": row.model.name,
                "display_name": row.model.display_name,
                "is_baseline": row.model.is_baseline,
                "mean": row.mean,
                "cells": {
                    t.name: (
                        None
                        if (c := row.cells.get(t.pk)) is None
                        else {
                            "te_accuracy": c.te,
                            "va_accuracy": c.va,
                            "layer": c.layer,
                            "selectivity": c.selectivity,
                            "seeds": c.seeds,
                            "te_sd": c.te_sd,
                            "run": c.run_id,
                        }
                    )
                    for t in board.tasks
                },
            }
            for row in board.rows
        ],
    }
    if board.training is not None:
        data["training"] = board.training.pk
        for row, shown in zip(board.rows, data["rows"], strict=True):
            shown["tokens"] = row.tokens
    return data


HUMAN_CSV_ROWS = (
    "baseline:human",
    "human:interval_low",
    "human:interval_high",
    "human:people",
    "human:kappa",
    "human:kappa_method",
    "human:kappa_sentences",
)


def board_csv(board: ProbingBoard) -> str:
    """One row per model, then the baseline rows; for each task its te accuracy (the
    seeds' mean), the layer chosen on va, the selectivity there (empty without a control
    task), the seeds and their te standard deviation (empty with one seed). Last the
    human rows: in each task's first column, people's accuracy (baseline:human), its 95%
    interval, how many people, and their kappa with its kind and sentence count. On a
    board of one training run's checkpoints a `tokens` column follows the model (empty
    on the baseline and human rows)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    by_tokens = board.training is not None
    lead = ["tokens"] if by_tokens else []
    header = ["model", *lead, "pooling", "probe"]
    for task in board.tasks:
        header += [task.name, f"{task.name}:layer", f"{task.name}:selectivity"]
        header += [f"{task.name}:seeds", f"{task.name}:te_sd"]
    writer.writerow(header)
    for row in board.rows:
        tokens = ["" if row.tokens is None else row.tokens] if by_tokens else []
        line: list[object] = [row.model.name, *tokens, board.pooling, board.probe]
        for cell in board.cells_of(row):
            line += (
                ["", "", "", "", ""]
                if cell is None
                else [
                    _number(cell.te),
                    cell.layer,
                    _number(cell.selectivity),
                    cell.seeds,
                    _number(cell.te_sd),
                ]
            )
        writer.writerow(line)
    for name in BOARD_BASELINES:
        line = [f"baseline:{name}", *([""] * len(lead)), "", ""]
        for value in board.baseline_cells(name):
            line += [_number(value), "", "", "", ""]
        writer.writerow(line)
    columns = [human_columns(human) for human in board.human_cells]
    for i, name in enumerate(HUMAN_CSV_ROWS):
        line = [name, *([""] * len(lead)), "", ""]
        for values in columns:
            line += [values[i], "", "", "", ""]
        writer.writerow(line)
    return out.getvalue()
