"""What a GPU worker imports once before it starts its pool (`RunKind.warm_up`): the
transformers model machinery, the auto classes, fast tokenizers and the architectures Gym
trains and tests with, which loading a model would otherwise import inside a run, seconds
before its first progress report.

This file imports nothing of the project's or Django's: the tests' fork server
(tests/worker_zygote.py) loads it by its path before any worker's environment is set."""

from __future__ import annotations

import importlib

# Names of transformers' top-level namespace, each importing its own module on first use.
TRANSFORMERS_NAMES = (
    "AutoConfig",
    "AutoModelForCausalLM",
    "AutoModelForMaskedLM",
    "AutoTokenizer",
    "PreTrainedTokenizerFast",
)
ARCHITECTURES = ("gpt2", "llama", "bert")


def preload_transformers() -> None:
    """Import the model machinery, the names above and each architecture's model module."""
    importlib.import_module("transformers.modeling_utils")
    transformers = importlib.import_module("transformers")
    for name in TRANSFORMERS_NAMES:
        getattr(transformers, name)
    for name in ARCHITECTURES:
        importlib.import_module(f"transformers.models.{name}.modeling_{name}")
