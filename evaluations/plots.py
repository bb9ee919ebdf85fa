"""The data of the surprisal plot on the result page: per condition and region, the mean
over items and its 95% interval. Pure Python (no Django): the selectors hand it the stored
values, static/js/result-plot.js draws it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

# z for a two-sided 95% interval under a normal approximation.
Z95 = 1.96


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
    95% interval, skipping missing values (None). Regions stay in region order."""
    series = []
    for condition in conditions:
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
        series.append({"condition": condition, "points": points})
    return {
        "metric": metric,
        "unit": "bits",
        "regions": [f"{number} {name}" for number, name in regions],
        "series": series,
    }


def _value_at(item: dict[str, Any], condition: str, metric: str, index: int) -> Any:
    values = (item.get(condition) or {}).get(metric) or []
    return values[index] if index < len(values) else None


def wilson_interval(successes: int, n: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of a proportion (successes of n). Unlike the normal
    approximation it stays inside [0, 1] and does not collapse to zero width at 0 or n
    successes, which small conditions of a minimal-pair set often reach."""
    if n <= 0:
        return None
    share = successes / n
    z2 = Z95 * Z95
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


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
