"""The scoring engine: sentences as region texts -> token and region surprisals (bits).

Pure Python + torch + transformers, no Django, so a GPU worker can run it alone.

Importing the package does not import torch: the names that need it (loading and
scoring) are imported on first use, so Django code can read METRICS, build_sentence or
the error classes without paying for torch in every web process.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .alignment import STRADDLING_RULES, build_sentence
from .boundary import WORD_PROBABILITY
from .kinds import KINDS, detect_kind
from .metrics import METRICS
from .schema import ModelLoadError, RegionScore, ScoringError, SentenceScore, TokenScore

if TYPE_CHECKING:
    from .engine import applied_word_probability, score_sentences
    from .loading import LoadedModel, clear_model_cache, load_model, model_info

# Name -> module of the names that import torch.
_LAZY = {
    "applied_word_probability": "engine",
    "LoadedModel": "loading",
    "clear_model_cache": "loading",
    "load_model": "loading",
    "model_info": "loading",
    "score_sentences": "engine",
}

__all__ = [
    "KINDS",
    "METRICS",
    "STRADDLING_RULES",
    "WORD_PROBABILITY",
    "LoadedModel",
    "ModelLoadError",
    "RegionScore",
    "ScoringError",
    "SentenceScore",
    "TokenScore",
    "applied_word_probability",
    "build_sentence",
    "clear_model_cache",
    "detect_kind",
    "load_model",
    "model_info",
    "score_sentences",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value
