"""The packed token format shared by suite evaluations and minimal-pair token tables."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest

from evaluations.scoring.schema import TokenScore
from evaluations.token_data import check_packed, pack_tokens, pack_word_tokens, unpack_tokens


def test_scored_tokens_round_trip_through_json() -> None:
    tokens = [
        TokenScore(text="The", start=0, end=3, region=0, surprisal=None),
        TokenScore(text="Ġcat", start=3, end=7, region=1, surprisal=7.25),
        TokenScore(text=".", start=7, end=8, region=1, surprisal=float("nan")),
    ]
    packed = json.loads(json.dumps(pack_tokens(tokens)))
    check_packed(packed)
    assert packed == {
        "text": ["The", "Ġcat", "."],
        "start": [0, 3, 7],
        "end": [3, 7, 8],
        "surp": [None, 7.25, None],  # not finite: missing, never NaN in JSON
    }
    stored = unpack_tokens(packed)
    assert [(t.text, t.start, t.end, t.surprisal) for t in stored] == [
        ("The", 0, 3, None),
        ("Ġcat", 3, 7, 7.25),
        (".", 7, 8, None),
    ]
    assert all(t.word is None and t.wordpos is None and t.punctuation is None for t in stored)


def test_exact_floats_survive() -> None:
    value = 1 / 3 + math.pi
    packed = json.loads(json.dumps(pack_tokens([TokenScore("a", 0, 1, 0, value)])))
    assert unpack_tokens(packed)[0].surprisal == value


def test_word_tokens() -> None:
    packed = pack_word_tokens(
        ["the", "cat", "."], [1.5, 2.0, 0.5], ["the", "cat", "."], [0, 1, 1], [False, False, True]
    )
    stored = unpack_tokens(packed)
    assert stored[2] == (".", None, None, 0.5, ".", 1, True)


@pytest.mark.parametrize(
    "packed, message",
    [
        ([], "must be an object"),
        ({"text": []}, "expected"),
        ({"text": ["a"], "start": [0], "end": [1, 2], "surp": [1.0]}, "differ in length"),
        ({"text": ["a"], "start": ["0"], "end": [1], "surp": [1.0]}, "start[0]"),
        ({"text": ["a"], "start": [True], "end": [1], "surp": [1.0]}, "start[0]"),
        ({"text": "a", "start": [0], "end": [1], "surp": [1.0]}, "must be a list"),
    ],
)
def test_check_packed_refuses(packed: Any, message: str) -> None:
    # `packed` is anything a stored row might hold, wrong types above all.
    with pytest.raises(ValueError, match=re.escape(message)):
        check_packed(packed)
