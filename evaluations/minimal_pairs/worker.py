"""What a GPU worker does with minimal-pair runs. No database: the payload holds the
sentences and the model's source; the result holds each sentence's tokens, packed
(`evaluations.token_data`), scored exactly as `minimal_pairs evaluate` scores them.

payload: {"model": {"source", "revision", "dtype"?}, "sentences": [sentence, ...],
          "word_probability"?: "corrected", "metric"?: "lm_eval"}
result: {"sentences": [packed tokens, ...], "diagnostics": {...},
         "model_info": {..., "tokenizer": name}}

With "word_probability": "corrected" each word's last token also carries the word's
boundary correction (`evaluate.word_surprisals`), as `minimal_pairs evaluate
--word-probability corrected` writes it, and the diagnostics name what was applied
("word_probability": "corrected", or "tokens" for a model it does not apply to, with
"word_boundary" saying why), as the suites' worker does.

With "metric": "lm_eval" each sentence is scored as lm-evaluation-harness scores it,
" " + sentence after BOS (`evaluate.score_pair_sentences` passes
`evaluate.HARNESS_DELIMITER` as the engine's `lead`); its offsets are the sentence's.

Small sets share a task (`evaluations.runs.packing`): `run_pairs_groups` takes "groups" (each
part's sentences) instead of "sentences", scores them in one engine call and gives one
result per group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from evaluations import scoring, token_data
from evaluations.minimal_pairs.evaluate import (
    model_tokenizer_name,
    score_pair_sentences,
    word_surprisals,
)
from evaluations.scoring.worker import (
    by_group,
    one_group,
    payload_model,
    summed_diagnostics,
    word_probability_diagnostics,
)


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
    asked = payload.get("word_probability") or "tokens"
    metric = payload.get("metric") or "nlpscholar"
    scores = score_pair_sentences(
        model, everything, progress=progress, word_probability=asked, metric=metric
    )
    info = dict(scoring.model_info(model))
    info["tokenizer"] = model_tokenizer_name(model) or spec["source"]
    word = word_probability_diagnostics(model, asked)
    results: list[dict[str, Any]] = []
    for part in by_group(scores, groups):
        results.append(
            {
                "sentences": [_packed(score) for score in part],
                "diagnostics": {**summed_diagnostics(part), **word},
                "model_info": dict(info),
            }
        )
    return results


def _packed(score: Any) -> dict[str, list[Any]]:
    """A sentence's tokens packed, their surprisals word-corrected where the score
    measured log2 B."""
    if score.log_boundary is None:
        return token_data.pack_tokens(score.tokens)
    tokens = [
        replace(token, surprisal=surp)
        for token, surp in zip(score.tokens, word_surprisals(score), strict=True)
    ]
    return token_data.pack_tokens(tokens)
