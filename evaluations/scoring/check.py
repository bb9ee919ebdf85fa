"""The check an uploaded model passes before it may run: its config, tokenizer and weights
load, the weights fill the model the config describes (none missing, none of another
shape), and one sentence scores to finite surprisals. No Django: a GPU worker runs it."""

from __future__ import annotations

import math
from typing import Any

from . import kinds, sources
from .schema import ModelLoadError

CHECK_SENTENCE = ["The keys to the cabinet", " are on the table."]


def _weights_match(source: str, kind: str) -> None:
    """Load the weights as saved (their own dtype, on the CPU) and refuse any the config's
    model lacks or holds in another shape: transformers would fill them with random values
    and say so only in its log."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    auto_class = AutoModelForCausalLM if kind == kinds.CAUSAL else AutoModelForMaskedLM
    try:
        _model, info = auto_class.from_pretrained(  # type: ignore[misc]
            source,
            dtype="auto",
            local_files_only=True,
            use_safetensors=True,
            output_loading_info=True,
            # Reported below, weight by weight, rather than raised without their names.
            ignore_mismatched_sizes=True,
        )
    except Exception as exc:  # noqa: BLE001 - every failure here is the upload's
        raise ModelLoadError(
            f"the weights do not load into the model that config.json describes: "
            f"{exc.__class__.__name__}: {str(exc)[:2000]}"
        ) from exc
    missing = sorted(info.get("missing_keys") or ())
    wrong = sorted(str(key) for key in info.get("mismatched_keys") or ())
    if missing or wrong:
        named = ", ".join([*wrong, *missing][:5])
        raise ModelLoadError(
            f"the weights do not match config.json: {len(wrong)} weight(s) of another "
            f"shape and {len(missing)} missing (e.g. {named}); save the model and its "
            "config together with model.save_pretrained(folder)"
        )


def check_model(source: str, *, kind: str) -> dict[str, Any]:
    """Load the model at `source` (a local folder or n-gram file) as `kind` and score one
    sentence; return what a run records of the model (`model_info`). Raises
    ModelLoadError (or the library's own error) with the reason it cannot run."""
    from .engine import score_sentences
    from .loading import load_model, model_info

    if kind in (kinds.CAUSAL, kinds.MASKED):
        _weights_match(sources.resolve(source), kind)  # an artifact: source is fetched
    model = load_model(source, kind=kind)
    (score,) = score_sentences(model, [CHECK_SENTENCE])
    values = [token.surprisal for token in score.tokens if token.surprisal is not None]
    if not values:
        raise ModelLoadError("the model scored no token of the check sentence")
    if not all(math.isfinite(value) for value in values):
        raise ModelLoadError(
            "the model gives surprisals that are not finite numbers (NaN or infinity) for "
            "the check sentence: its weights are broken"
        )
    return model_info(model)
