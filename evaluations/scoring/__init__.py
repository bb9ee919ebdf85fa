"""The scoring engine: sentences as region texts -> token and region surprisals (bits).

Pure Python + torch + transformers, no Django, so a GPU worker can run it alone.
"""

from __future__ import annotations

from .alignment import build_sentence
from .engine import STRADDLING_RULES, score_sentences
from .kinds import KINDS, detect_kind
from .loading import LoadedModel, clear_model_cache, load_model, model_info
from .metrics import METRICS
from .schema import ModelLoadError, RegionScore, ScoringError, SentenceScore, TokenScore

__all__ = [
    "KINDS",
    "METRICS",
    "STRADDLING_RULES",
    "LoadedModel",
    "ModelLoadError",
    "RegionScore",
    "ScoringError",
    "SentenceScore",
    "TokenScore",
    "build_sentence",
    "clear_model_cache",
    "detect_kind",
    "load_model",
    "model_info",
    "score_sentences",
]
