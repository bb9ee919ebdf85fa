"""What a GPU worker does with one scoring task. No database: everything it needs comes
in the task's payload, and everything it produces goes back in the result."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from evaluations import scoring
from evaluations.scoring.boundary import corrected_sum
from evaluations.scoring.loading import set_max_loaded_models
from evaluations.scoring.metrics import region_metrics
from evaluations.token_data import pack_tokens

# Stored token surprisals are rounded to 1e-4 bits: the engine's own batching tolerance,
# and it keeps a token at about 20 bytes of JSON instead of 31 (see token_data).
TOKEN_DIGITS = 4


def sentence_metrics(
    tokens: list[Any], log_boundary: list[float | None] | None = None
) -> dict[str, float | None]:
    """The metrics over all tokens of a sentence: what `(*;%cond%)` refers to; with
    `log_boundary` (word_probability "corrected") its sum is word-corrected too."""
    metrics = region_metrics([t.surprisal for t in tokens])
    if log_boundary is not None and tokens:
        marks = [math.nan if m is None else m for m in log_boundary]
        metrics["sum"] = corrected_sum(metrics["sum"], marks, 0, len(tokens))
    return metrics


def _max_loaded_models() -> int:
    from django.conf import settings

    return settings.GYM_MAX_LOADED_MODELS if settings.configured else 2


def payload_model(spec: dict[str, Any]) -> Any:
    """The payload's model ({"source", "revision", "dtype"?}), from the worker's bounded
    cache of loaded models."""
    set_max_loaded_models(_max_loaded_models())
    return scoring.load_model(
        spec["source"], revision=spec.get("revision") or None, dtype=spec.get("dtype") or None
    )


def run_scoring(
    payload: dict[str, Any], progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Score the payload's sentences; return region and sentence metrics per sentence.

    payload: {"model": {"source", "revision", "dtype"?}, "sentences": [[region, ...], ...],
              "straddling"?: "missing" | "split", "word_probability"?: "tokens" | "corrected"}
    result: {"sentences": [{"regions": [{metric: value}], "sentence": {metric: value},
                            "tokens": packed tokens (evaluations.token_data)}],
             "diagnostics": {...}, "model_info": {...}}
    """
    return run_scoring_groups(one_group(payload), progress)[0]


def one_group(payload: dict[str, Any]) -> dict[str, Any]:
    """A one-run payload ("sentences") as a pack of one group ("groups")."""
    groups = {key: value for key, value in payload.items() if key != "sentences"}
    groups["groups"] = [payload["sentences"]]
    return groups


def word_probability_diagnostics(model: Any, asked: str) -> dict[str, Any]:
    """What the word_probability asked for gave with this model and why, for a run's
    diagnostics; named only when asked for, so that results without the option read as
    before."""
    if asked == "tokens":
        return {}
    applied, why = scoring.applied_word_probability(model)
    return {"word_probability": applied, "word_boundary": why}


def by_group(scores: list[Any], groups: list[list[Any]]) -> Iterator[list[Any]]:
    """Each group's share of `scores`, scored for all groups' sentences in one call."""
    start = 0
    for group in groups:
        yield scores[start : start + len(group)]
        start += len(group)


def run_scoring_groups(
    payload: dict[str, Any], progress: Callable[[int, int], None] | None = None
) -> list[dict[str, Any]]:
    """Several groups of sentences (suites) in one engine call, one result per group.

    One call lets identical sentences and shared prefixes across suites be computed once
    and fills every batch; each group still gets its own sentences and diagnostics.
    payload: as for run_scoring, with "groups": [[[region, ...], ...], ...] instead of
    "sentences"; progress counts the sentences of all groups together.
    """
    model = payload_model(payload["model"])
    rule = payload.get("straddling") or "missing"
    asked = payload.get("word_probability") or "tokens"
    groups = payload["groups"]
    everything = [sentence for group in groups for sentence in group]
    # `progress` is called after each batch; the caller throttles it (see tasks).
    scores = scoring.score_sentences(
        model, everything, progress=progress, straddling=rule, word_probability=asked
    )
    info = scoring.model_info(model)
    word = word_probability_diagnostics(model, asked)
    results: list[dict[str, Any]] = []
    for part in by_group(scores, groups):
        results.append(
            {
                "sentences": [
                    {
                        "regions": [region.metrics for region in score.regions],
                        "sentence": sentence_metrics(score.tokens, score.log_boundary),
                        "tokens": pack_tokens(score.tokens, digits=TOKEN_DIGITS),
                    }
                    for score in part
                ],
                "diagnostics": {**summed_diagnostics(part), "straddling_rule": rule, **word},
                "model_info": dict(info),
            }
        )
    return results


def summed_diagnostics(scores: list[Any]) -> dict[str, Any]:
    """The numeric diagnostics of sentences added up (flags count the sentences)."""
    diagnostics: dict[str, Any] = {}
    for score in scores:
        for key, value in score.diagnostics.items():
            if isinstance(value, bool):
                diagnostics[key] = diagnostics.get(key, 0) + int(value)
            elif isinstance(value, int | float):
                diagnostics[key] = diagnostics.get(key, 0) + value
    return diagnostics
