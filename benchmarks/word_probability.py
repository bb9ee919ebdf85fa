"""How much the word-boundary correction (`--word-probability corrected`) changes results.

Scores the 34 SyntaxGym 2020 suites in `../shared/data/syntaxgym-2020/nextflow` twice
with one model, summed token surprisals and corrected, in one engine call each, and
counts the region values (item x condition x region, the suite's metric) and the
prediction outcomes (item x prediction) and item results that differ, and the suites
whose accuracy moves. The default model is the tests' tiny GPT-2 (tests/tiny_models.py),
built once into $TMPDIR/gym-bench/tiny-gpt2.

Usage: .venv/bin/python benchmarks/word_probability.py [--model PATH] [--json OUT] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# A region value "changes" when it moves by more than SyntaxGym's `=` tolerance at 0.
CHANGE = 1e-3


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="a saved model folder; default: the tiny GPT-2")
    parser.add_argument(
        "--suites",
        default=str(
            Path(os.environ.get("GYM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared"))
            / "syntaxgym-2020"
            / "nextflow"
        ),
    )
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--smoke", action="store_true", help="two suites only, for CI")
    args = parser.parse_args()

    from evaluations.scoring import worker
    from evaluations.syntaxgym import outcomes
    from suites import formats
    from tests.tiny_models import make_gpt2

    model = args.model or str(make_gpt2(Path(tempfile.gettempdir()) / "gym-bench" / "tiny-gpt2"))
    paths = sorted(Path(args.suites).glob("*.json"))[: 2 if args.smoke else None]
    if not paths:
        raise SystemExit(f"no suites in {args.suites}")
    suites = []
    for path in paths:
        loaded = formats.load_suite_file(path)
        if not loaded.ok or loaded.suite is None:
            raise SystemExit(f"{path}: not a valid suite")
        suites.append(loaded.suite)
    groups = [[regions for _i, _c, regions in formats.sentences(suite)] for suite in suites]
    results: dict[str, list[Any]] = {}
    for mode in ("tokens", "corrected"):
        payload = {"model": {"source": model}, "groups": groups, "word_probability": mode}
        scored = worker.run_scoring_groups(payload)
        results[mode] = [
            outcomes.score_items(suite, part["sentences"])
            for suite, part in zip(suites, scored, strict=True)
        ]
        if mode == "corrected":
            applied = scored[0]["diagnostics"].get("word_probability")
            if applied != "corrected":
                raise SystemExit(f"the correction does not apply to {model}: {scored[0]}")

    figures = compare(results["tokens"], results["corrected"])
    figures["model"] = model
    figures["suites"] = len(suites)
    for key, value in figures.items():
        print(f"{key}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


def compare(plain: list[Any], corrected: list[Any]) -> dict[str, Any]:
    regions = regions_changed = regions_missing = regions_empty = 0
    largest = 0.0
    predictions = predictions_changed = items = items_changed = suites_changed = 0
    for before, after in zip(plain, corrected, strict=True):
        metric = before.metric
        for old, new in zip(before.items, after.items, strict=True):
            for condition, by_metric in old.values.items():
                for a, b in zip(by_metric[metric], new.values[condition][metric], strict=True):
                    regions += 1
                    if a is None or b is None:
                        regions_missing += a is None or b is None
                        continue
                    regions_empty += a == 0.0 and b == 0.0
                    largest = max(largest, abs(a - b))
                    regions_changed += abs(a - b) > CHANGE
            predictions += len(old.outcomes)
            predictions_changed += sum(
                1 for x, y in zip(old.outcomes, new.outcomes, strict=True) if x != y
            )
            items += 1
            items_changed += old.passed != new.passed
        suites_changed += before.accuracy != after.accuracy
    mean = [o.accuracy for o in plain if o.accuracy is not None]
    mean_corrected = [o.accuracy for o in corrected if o.accuracy is not None]
    return {
        "region_values": regions,
        "region_values_changed": regions_changed,
        "region_values_missing": regions_missing,
        "region_values_empty": regions_empty,
        "largest_change_bits": round(largest, 3),
        "prediction_outcomes": predictions,
        "prediction_outcomes_changed": predictions_changed,
        "items": items,
        "item_results_changed": items_changed,
        "suite_accuracies_changed": suites_changed,
        "mean_accuracy_tokens": round(sum(mean) / len(mean), 4),
        "mean_accuracy_corrected": round(sum(mean_corrected) / len(mean_corrected), 4),
    }


if __name__ == "__main__":
    main()
