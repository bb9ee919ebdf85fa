"""What a GPU worker does with one minimal-pair run. No database: the payload holds the
set's sentences and the model's source; the result holds each sentence's tokens, packed
(`evaluations.token_data`), scored exactly as `minimal_pairs evaluate` scores them.

payload: {"model": {"source", "revision", "dtype"?}, "sentids": [...], "sentences": [...]}
result: {"sentids": [...], "sentences": [packed tokens, ...], "diagnostics": {...},
         "model_info": {..., "tokenizer": name}}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaluations import scoring, token_data
from evaluations.minimal_pairs.evaluate import model_tokenizer_name, score_pair_sentences
from evaluations.scoring.schema import ScoringError
from evaluations.worker import payload_model, summed_diagnostics


def run_pairs(
    payload: dict[str, Any], progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    sentids = payload["sentids"]
    sentences = payload["sentences"]
    if len(sentids) != len(sentences):
        raise ScoringError("the minimal-pair payload's sentids and sentences differ in length")
    spec = payload["model"]
    model = payload_model(spec)
    scores = score_pair_sentences(model, sentences, progress=progress)
    info = dict(scoring.model_info(model))
    info["tokenizer"] = model_tokenizer_name(model) or spec["source"]
    return {
        "sentids": list(sentids),
        "sentences": [token_data.pack_tokens(score.tokens) for score in scores],
        "diagnostics": summed_diagnostics(scores),
        "model_info": info,
    }
