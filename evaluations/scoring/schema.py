"""The plain data the engine hands back, and the errors it raises.

Everything here is built from str, int, float, None, list and dict so that
`dataclasses.asdict` gives a value a Celery broker can carry as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ScoringError(Exception):
    """Something about the input or the model prevents scoring."""


class ModelLoadError(ScoringError):
    """The model or its tokenizer cannot be loaded or cannot be used for scoring."""


@dataclass
class TokenScore:
    text: str  # the token as the tokenizer spells it ("Ġthe", "▁the", "##s")
    start: int  # character offsets of the token in the sentence string
    end: int
    region: int | None  # 0-based index into the sentence's region list
    surprisal: float | None  # bits; None when missing (no BOS to condition the first token on)


@dataclass
class RegionScore:
    text: str
    start: int
    end: int
    metrics: dict[str, float | None]


@dataclass
class SentenceScore:
    text: str
    tokens: list[TokenScore]
    regions: list[RegionScore]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    # With word_probability="corrected" (boundary.py): log2 B before each token, and
    # after the last (one more value than tokens; None where not scored). Else None.
    log_boundary: list[float | None] | None = None
