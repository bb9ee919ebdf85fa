"""The evaluations app's models, for Django's registry and for the code that reads runs
of any kind. Each model lives in its room: the language models in `language_models`, the
run every kind extends in the run core (`runs`), each kind's runs and results in the
kind's package. A new kind adds its line here."""

from __future__ import annotations

from evaluations.language_models.models import IMPORTED_PREFIX, LanguageModel
from evaluations.minimal_pairs.models import PairEvaluation, PairSentenceTokens
from evaluations.probing.models import ProbingAnnotation, ProbingLayerResult, ProbingRun
from evaluations.runs.models import Run, RunPart
from evaluations.syntaxgym.models import (
    ITEM_ROWS_SHOWN,
    Evaluation,
    EvaluationSnapshot,
    ItemResult,
    PredictionResult,
)
from evaluations.training.models import ModelSeries, SeriesMember, TrainingRun

__all__ = [
    "IMPORTED_PREFIX",
    "ITEM_ROWS_SHOWN",
    "Evaluation",
    "EvaluationSnapshot",
    "ItemResult",
    "LanguageModel",
    "PairEvaluation",
    "PairSentenceTokens",
    "PredictionResult",
    "ProbingAnnotation",
    "ProbingLayerResult",
    "ProbingRun",
    "Run",
    "RunPart",
    "ModelSeries",
    "SeriesMember",
    "TrainingRun",
]
