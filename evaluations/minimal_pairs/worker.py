"""What a GPU worker does with minimal-pair runs. No database: the payload holds the
sentences and the model's source; the result holds each sentence's tokens, packed
(`evaluations.token_data`), scored exactly as `minimal_pairs evaluate` scores them.

payload: {"model": {"source", "revision", "dtype"?}, "sentences": [sentence, ...]}
result: {"sentences": [packed tokens, ...], "diagnostics": {...},
         "model_info": {..., "tokenizer": name}}

Small sets share a task (`evaluations.runs.packing`): `run_pairs_groups` takes "groups" (each
part's sentences) instead of "sentences", scores them in one engine call and gives one
result per group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaluations import scoring, token_data
from evaluations.minimal_pairs.evaluate import model_tokenizer_name, score_pair_sentences
from evaluations.scoring.worker import by_group, one_group, payload_model, summed_diagnostics


def run_pairs(
    payload: dict[str, Any], progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    return run_pairs_groups(one_group(payload), progress)[0]


def run_pairs_groups(
    payload: dict[str, Any], progress: Callable[[int, int], None] | None = None
) -> list[dict[str, Any]]:
    spec = payload["model"]
    model = payload_model(spec)
    groups = payload["groups"]
    everything = [sentence for group in groups for sentence in group]
    scores = score_pair_sentences(model, everything, progress=progress)
    info = dict(scoring.model_info(model))
    info["tokenizer"] = model_tokenizer_name(model) or spec["source"]
    results = []
    for part in by_group(scores, groups):
        results.append(
            {
                "sentences": [token_data.pack_tokens(score.tokens) for score in part],
                "diagnostics": summed_diagnostics(part),
                "model_info": dict(info),
            }
        )
    return results
