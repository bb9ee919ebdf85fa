"""From scored sentences to prediction outcomes and the SyntaxGym results format.

Pure Python (no Django), shared by the `store` task and the `score` command."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from evaluations.scoring import METRICS
from evaluations.token_data import check_packed
from suites import formats
from suites.formats import predictions, schema


def prediction_metric(metric: Any) -> str:
    """The region metric predictions compare (see `schema.prediction_metric`, which the
    suite page uses too, so that both name the same metric)."""
    return schema.prediction_metric(metric)


@dataclass
class ItemOutcome:
    item_number: int
    # {condition: {metric: [value per region]}}
    values: dict[str, dict[str, list[float | None]]]
    # per prediction: True, False, or None when a value it needs is missing
    outcomes: list[bool | None]
    passed: bool | None
    # Strict comparisons of this item whose two sides were exactly equal (each failed).
    ties: int = 0
    # The chance that the item passes when every tie is broken by a fair coin.
    pass_chance: float | None = None
    # {condition: packed tokens} when the worker sent them (evaluations.token_data).
    tokens: dict[str, dict[str, list[Any]]] | None = None


@dataclass
class PredictionOutcome:
    position: int
    formula: str
    passed: int
    evaluated: int
    # Tied strict comparisons over all evaluable items.
    ties: int = 0

    @property
    def accuracy(self) -> float | None:
        return self.passed / self.evaluated if self.evaluated else None


@dataclass
class SuiteOutcome:
    items: list[ItemOutcome]
    predictions: list[PredictionOutcome]
    accuracy: float | None
    metric: str
    # Tied strict comparisons over all items and predictions (a tie counts as failed).
    ties: int = 0
    # Expected accuracy when ties are broken at random (Hu et al. 2020).
    accuracy_random_ties: float | None = None


def score_items(suite: dict[str, Any], scored: list[dict[str, Any]]) -> SuiteOutcome:
    """Evaluate every prediction on every item.

    `scored[i]` belongs to the i-th sentence of `formats.sentences(suite)` and holds
    {"regions": [{metric: value}], "sentence": {metric: value}}. An item passes when all
    predictions hold; accuracy is the share of evaluable items that pass."""
    keys = formats.sentences(suite)
    if len(keys) != len(scored):
        raise ValueError(f"{len(scored)} scored sentences for {len(keys)} in the suite")
    metric = prediction_metric(suite["meta"].get("metric"))
    formulas = [p["formula"] for p in suite.get("predictions", [])]
    parsed = [predictions.parse(f) for f in formulas]
    by_item: dict[int, dict[str, dict[str, Any]]] = {}
    for (item_number, condition, _regions), result in zip(keys, scored, strict=True):
        by_item.setdefault(item_number, {})[condition] = result

    prediction_outcomes = [PredictionOutcome(i, f, 0, 0) for i, f in enumerate(formulas)]
    items: list[ItemOutcome] = []
    items_passed = items_evaluated = 0
    chance_total = 0.0
    for item_number, conditions in by_item.items():

        def lookup(region: int | None, condition: str, _c: dict = conditions) -> float | None:
            result = _c[condition]
            return (result["sentence"] if region is None else result["regions"][region - 1]).get(
                metric
            )

        outcomes: list[bool | None] = []
        item_ties = 0
        chance = 1.0
        for node, tally in zip(parsed, prediction_outcomes, strict=True):
            try:
                holds = predictions.evaluate(node, lookup)
                ties = predictions.tied_comparisons(node, lookup)
                chance *= predictions.truth_with_random_ties(node, lookup) if ties else float(holds)
                outcome: bool | None = holds
            except (predictions.MissingValueError, ZeroDivisionError):
                outcome, ties = None, 0
            outcomes.append(outcome)
            if outcome is not None:
                tally.evaluated += 1
                tally.passed += int(outcome)
                tally.ties += ties
                item_ties += ties
        passed: bool | None = None
        pass_chance: float | None = None
        if formulas and all(o is not None for o in outcomes):
            passed = all(outcomes)
            pass_chance = chance
            items_evaluated += 1
            items_passed += int(passed)
            chance_total += chance
        values = {
            condition: {m: [region.get(m) for region in result["regions"]] for m in METRICS}
            for condition, result in conditions.items()
        }
        items.append(
            ItemOutcome(
                item_number,
                values,
                outcomes,
                passed,
                item_ties,
                pass_chance,
                tokens=_item_tokens(conditions),
            )
        )
    accuracy = items_passed / items_evaluated if items_evaluated else None
    return SuiteOutcome(
        items,
        prediction_outcomes,
        accuracy,
        metric,
        ties=sum(p.ties for p in prediction_outcomes),
        accuracy_random_ties=chance_total / items_evaluated if items_evaluated else None,
    )


def _item_tokens(conditions: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The packed tokens of an item's conditions, checked; None when the worker sent none
    (an older worker). Raises ValueError for tokens that are not packed tokens."""
    tokens = {name: result["tokens"] for name, result in conditions.items() if "tokens" in result}
    for name, packed in tokens.items():
        try:
            check_packed(packed)
        except ValueError as invalid:
            raise ValueError(f"condition {name!r}: {invalid}") from None
    return tokens or None


class PredictionTally(Protocol):
    """What a results document says of one prediction: a scored PredictionOutcome, or a
    stored PredictionResult."""

    @property
    def formula(self) -> str: ...
    @property
    def accuracy(self) -> float | None: ...
    @property
    def passed(self) -> int: ...
    @property
    def evaluated(self) -> int: ...
    @property
    def ties(self) -> int: ...


def prediction_entries(tallies: Iterable[PredictionTally]) -> list[dict[str, Any]]:
    """The "predictions" of a results document's "results", in the order given."""
    return [
        {
            "formula": p.formula,
            "accuracy": p.accuracy,
            "passed": p.passed,
            "evaluated": p.evaluated,
            "ties": p.ties,
        }
        for p in tallies
    ]


def results_document(
    suite: dict[str, Any],
    model_name: str,
    values: dict[int, dict[str, dict[str, list[float | None]]]],
) -> dict[str, Any]:
    """The suite in SyntaxGym's results format: meta.model, and per region
    "metric_value": {metric: value} for every one of METRICS (bits)."""
    document = {
        "meta": {**suite["meta"], "model": model_name},
        "region_meta": suite["region_meta"],
        "predictions": suite.get("predictions", []),
        "items": [],
    }
    for item in suite["items"]:
        item_values = values.get(item["item_number"], {})
        conditions = []
        for condition in item["conditions"]:
            metrics = item_values.get(condition["condition_name"], {})
            conditions.append(
                {
                    "condition_name": condition["condition_name"],
                    "regions": [
                        {
                            **region,
                            "metric_value": {
                                m: (metrics.get(m) or [None] * (i + 1))[i] for m in METRICS
                            },
                        }
                        for i, region in enumerate(condition["regions"])
                    ],
                }
            )
        document["items"].append({"item_number": item["item_number"], "conditions": conditions})
    return document
