"""Token-level surprisals, stored compactly: one format for the suites' item view and the
minimal-pair token tables. Pure Python, no Django.

A packed sentence is a dict of parallel arrays (JSON), one entry per token:

- scored by Gym: ``{"text": [...], "start": [...], "end": [...], "surp": [...]}``, where
  start/end are character offsets in the sentence and surp is in bits (None where
  missing, e.g. the first token of a model without BOS);
- brought with its own words (an NLPScholar predictions file):
  ``{"text": [...], "surp": [...], "word": [...], "wordpos": [...], "punct": [...]}``.

Parallel arrays keep the keys out of every token: about a third of the size of one dict
per token in JSON, and a sentence is one value to read or write.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

SCORED_KEYS = ("text", "start", "end", "surp")
WORD_KEYS = ("text", "surp", "word", "wordpos", "punct")


class ScoredToken(Protocol):
    # Read-only: the scoring engine's tokens and named tuples alike.
    @property
    def text(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def surprisal(self) -> float | None: ...


class StoredToken(NamedTuple):
    text: str
    start: int | None
    end: int | None
    surprisal: float | None
    word: str | None
    wordpos: int | None
    punctuation: bool | None


def _bits(value: float | None, digits: int | None = None) -> float | None:
    # JSON has no NaN or infinity: a value that is not finite is stored as missing.
    if value is None or not math.isfinite(value):
        return None
    return float(value) if digits is None else round(float(value), digits)


def pack_tokens(
    tokens: Iterable[ScoredToken], *, digits: int | None = None
) -> dict[str, list[Any]]:
    """The engine's tokens (`evaluations.scoring.schema.TokenScore`) as parallel arrays.

    `digits`: round surprisals to that many decimals (4 keeps 1e-4 bits, the engine's
    own batching tolerance, in about 7 characters instead of the 18 of a float32 value
    printed as a double)."""
    packed: dict[str, list[Any]] = {key: [] for key in SCORED_KEYS}
    for token in tokens:
        packed["text"].append(token.text)
        packed["start"].append(int(token.start))
        packed["end"].append(int(token.end))
        packed["surp"].append(_bits(token.surprisal, digits))
    return packed


def pack_word_tokens(
    text: Sequence[str],
    surp: Sequence[float | None],
    word: Sequence[str],
    wordpos: Sequence[int],
    punct: Sequence[bool],
) -> dict[str, list[Any]]:
    """Tokens that come with their own words (imported predictions), as parallel arrays."""
    packed: dict[str, list[Any]] = {
        "text": [str(value) for value in text],
        "surp": [_bits(value) for value in surp],
        "word": [str(value) for value in word],
        "wordpos": [int(value) for value in wordpos],
        "punct": [bool(value) for value in punct],
    }
    check_packed(packed)
    return packed


_TYPES: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "start": (int,),
    "end": (int,),
    "surp": (int, float, type(None)),
    "word": (str,),
    "wordpos": (int,),
    "punct": (bool,),
}


def check_packed(packed: Mapping[str, Any]) -> None:
    """Raise ValueError unless `packed` is one of the two layouts with arrays of equal
    length and values of the right types."""
    if not isinstance(packed, Mapping):
        raise ValueError(f"packed tokens must be an object, not {type(packed).__name__}")
    keys = set(packed)
    if keys != set(SCORED_KEYS) and keys != set(WORD_KEYS):
        raise ValueError(
            f"packed tokens have the keys {sorted(keys)}; expected {list(SCORED_KEYS)} "
            f"or {list(WORD_KEYS)}"
        )
    lengths = {key: len(value) for key, value in packed.items() if isinstance(value, list)}
    if len(lengths) != len(keys):
        raise ValueError("every value of packed tokens must be a list")
    if len(set(lengths.values())) > 1:
        raise ValueError(f"packed token arrays differ in length: {lengths}")
    for key, values in packed.items():
        types = _TYPES[key]
        for index, value in enumerate(values):
            # bool is an int in Python: only "punct" may hold one.
            if not isinstance(value, types) or (isinstance(value, bool) and key != "punct"):
                raise ValueError(f"packed tokens: {key}[{index}] is {value!r}")


def unpack_tokens(packed: Mapping[str, Sequence[Any]]) -> list[StoredToken]:
    """The tokens of a packed sentence, whichever layout it has (absent fields None)."""
    texts = packed.get("text", [])
    count = len(texts)

    def column(key: str) -> Sequence[Any]:
        return packed.get(key) or [None] * count

    return [
        StoredToken(*values)
        for values in zip(
            texts,
            column("start"),
            column("end"),
            column("surp"),
            column("word"),
            column("wordpos"),
            column("punct"),
            strict=True,
        )
    ]
