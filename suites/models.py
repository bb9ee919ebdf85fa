"""The suites app's models, for Django's registry and for the code that reads test data
of any kind. Each model lives in its room: what every kind shares in `catalog_models`,
each kind's data in the kind's package. A new kind adds its line here."""

from __future__ import annotations

from suites.catalog_models import GymData, Tag, owner_field, tags_field
from suites.corpora.models import Corpus
from suites.minimal_pairs.models import MinimalPairSet, PairSetSentence, PairSetVersion
from suites.probing.models import ProbingInstance, ProbingTask
from suites.syntaxgym.models import Condition, Item, Prediction, Region, Suite, default_metric

__all__ = [
    "Condition",
    "Corpus",
    "GymData",
    "Item",
    "MinimalPairSet",
    "PairSetSentence",
    "PairSetVersion",
    "Prediction",
    "ProbingInstance",
    "ProbingTask",
    "Region",
    "Suite",
    "Tag",
    "default_metric",  # named by migration 0001 (Suite.metric's default)
    "owner_field",
    "tags_field",
]
