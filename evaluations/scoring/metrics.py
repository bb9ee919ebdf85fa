"""Region values from token surprisals."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from suites.formats.schema import REGION_METRICS

# The region metrics are the SyntaxGym results format's own keys, defined with the format.
METRICS: tuple[str, ...] = REGION_METRICS


def region_metrics(surprisals: Sequence[float | None]) -> dict[str, float | None]:
    """All METRICS for one region's token surprisals (bits).

    A region without tokens (an empty region) sums to 0 and has no mean, median, range,
    max or min. A region holding a missing value (a first token with no BOS to condition
    on) is missing as a whole: a partial sum would pass for a real one.
    """
    if not surprisals:
        return {"sum": 0.0, "mean": None, "median": None, "range": None, "max": None, "min": None}
    if any(value is None for value in surprisals):
        return dict.fromkeys(METRICS)
    values = [float(value) for value in surprisals if value is not None]
    total = math.fsum(values)
    return {
        "sum": total,
        "mean": total / len(values),
        "median": float(statistics.median(values)),
        "range": max(values) - min(values),
        "max": max(values),
        "min": min(values),
    }
