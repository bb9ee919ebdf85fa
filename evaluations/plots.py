"""The data of the surprisal plot on the result page: per condition and region, the mean
over items and its 95% interval, and how each condition is drawn (its marker and a small
horizontal offset, so that conditions with equal means stay visible side by side). Pure
Python (no Django): the selectors hand it the stored values, static/js/result-plot.js
draws it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from evaluations.statistics import Z95, wilson_interval

# Chart.js point styles, one per condition (cycled), so that no condition relies on
# colour alone.
MARKERS = ("circle", "triangle", "rect", "rectRot", "crossRot", "star", "rectRounded", "cross")
# Horizontal distance between neighbouring conditions' points, in regions, and the most
# the conditions of one region may spread over in all.
OFFSET_STEP = 0.08
OFFSET_SPAN = 0.5


def offsets(count: int) -> list[float]:
    """Horizontal offsets (in regions) of `count` conditions, centred on the region and
    never spreading wider than OFFSET_SPAN."""
    if count < 2:
        return [0.0] * count
    step = min(OFFSET_STEP, OFFSET_SPAN / (count - 1))
    return [round((i - (count - 1) / 2) * step, 6) for i in range(count)]


def without_empty_regions(values: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """The item's values with those of empty regions set to None. An empty region has no
    words; SyntaxGym counts its sum as 0 bits, which predictions may read, but a plot of
    surprisal must not show it as a region that cost nothing to read."""
    cleaned = dict(values)
    for condition in item.get("conditions", []):
        name = condition.get("condition_name")
        empty = [
            i
            for i, region in enumerate(condition.get("regions", []))
            if not str(region.get("content", "")).strip()
        ]
        if not empty or name not in values:
            continue
        cleaned[name] = {
            metric: [None if i in empty else v for i, v in enumerate(series or [])]
            for metric, series in (values[name] or {}).items()
        }
    return cleaned


def interval(values: Sequence[float]) -> tuple[float, float, float] | None:
    """(mean, lower, upper) of a 95% interval for the mean: mean ± 1.96·sd/√n with the
    sample standard deviation (n - 1); one value gives an interval of zero width."""
    if not values:
        return None
    mean = math.fsum(values) / len(values)
    half = Z95 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return mean, mean - half, mean + half


def plot_data(
    item_values: Sequence[dict[str, Any]],
    conditions: Sequence[str],
    regions: Sequence[tuple[int, str]],
    metric: str,
) -> dict[str, Any]:
    """Per condition and region, the mean over items of the evaluation's metric and its
    95% interval, skipping missing values (None: a region without a value, or an empty
    one, see `without_empty_regions`), and each condition's marker and offset. A region
    without any value has no point (None), never 0. Regions stay in region order."""
    series = []
    shifts = offsets(len(conditions))
    for number, condition in enumerate(conditions):
        points: list[dict[str, float | int] | None] = []
        for index in range(len(regions)):
            values = [
                float(v)
                for item in item_values
                if (v := _value_at(item, condition, metric, index)) is not None
            ]
            summary = interval(values)
            points.append(
                None
                if summary is None
                else {"y": summary[0], "yMin": summary[1], "yMax": summary[2], "n": len(values)}
            )
        series.append(
            {
                "condition": condition,
                "points": points,
                "marker": MARKERS[number % len(MARKERS)],
                "offset": shifts[number],
            }
        )
    return {
        "metric": metric,
        "unit": "bits",
        "regions": [f"{number} {name}" for number, name in regions],
        "series": series,
    }


def _value_at(item: dict[str, Any], condition: str, metric: str, index: int) -> Any:
    values = (item.get(condition) or {}).get(metric) or []
    return values[index] if index < len(values) else None


def accuracy_bars(groups: Sequence[tuple[str, int, int]]) -> dict[str, Any]:
    """The bar chart of a minimal-pair result page: per condition group (label, pairs
    with acc, pairs), the accuracy and its 95% Wilson interval."""
    bars = []
    for label, passed, total in groups:
        low, high = wilson_interval(passed, total) or (0.0, 0.0)
        bars.append(
            {
                "label": label,
                "y": passed / total if total else None,
                "yMin": low,
                "yMax": high,
                "passed": passed,
                "n": total,
            }
        )
    return {"interval": "Wilson score, 95%", "bars": bars}
