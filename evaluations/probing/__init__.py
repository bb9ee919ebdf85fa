"""Probing: which layer of a model encodes a property of the sentence, above baselines.

Pure Python + torch, no Django (like `evaluations.scoring`): the worker and the `probe`
command both call `probe_task`.
"""

from __future__ import annotations

from evaluations.probing.extract import (
    DEFAULT_MEMORY_LIMIT,
    POOLINGS,
    Features,
    extract_features,
)
from evaluations.probing.probes import PROBES, ProbeFit, Split, fit_probe
from evaluations.probing.run import baselines, probe_task

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "POOLINGS",
    "PROBES",
    "Features",
    "ProbeFit",
    "Split",
    "baselines",
    "extract_features",
    "fit_probe",
    "probe_task",
]
