"""Why a region's value is missing, derived from what an evaluation stored (each
sentence's token offsets and the suite's regions), so that it holds for results stored
before anyone asked. Shared by the item page, the item API and the result page.

The reasons:

- "uncovered": no token of the model covers the region's characters; its tokenizer
  dropped them (the n-gram model drops punctuation inside a sentence before it looks
  anything up);
- "straddled": a token that begins in an earlier region covers the region, so the region
  received no token of its own (the "missing" rule for straddling tokens);
- "no_surprisal": the region has tokens, but one has no surprisal (the first token of a
  model without a beginning-of-sentence token);
- "unknown": the evaluation did not store tokens (scored before Gym kept them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluations.scoring.alignment import align_tokens, build_sentence, region_gaps
from evaluations.token_data import unpack_tokens

KINDS = ("uncovered", "straddled", "no_surprisal", "unknown")
# How the result page names each reason, after a count of regions.
LABELS = {
    "uncovered": "no token of the model covers them",
    "straddled": "absorbed by a token that straddles a region boundary",
    "no_surprisal": "a token in them has no surprisal",
    "unknown": "reason unknown: scored before Gym kept tokens",
}


@dataclass(frozen=True)
class MissingReason:
    kind: str
    # The sentence shown next to the missing value.
    text: str
    # "uncovered": the characters no token covers; "straddled": the regions, as "2-3".
    detail: str = ""


def _quoted(words: Sequence[str]) -> str:
    quoted = [f"'{word}'" for word in words]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _uncovered(characters: str, model_kind: str) -> MissingReason:
    shown = _quoted(characters.split())
    if model_kind == "ngram":
        # Gym's word splitting drops them before any vocabulary is asked (so even a
        # model with "," in its vocabulary never scores one; the CMU trigram has none).
        why = f"the n-gram model drops {shown} (it scores words, not punctuation inside a sentence)"
    else:
        why = f"its tokenizer dropped {shown}"
    return MissingReason(
        "uncovered", f"no token of this model covers this region: {why}", characters
    )


def sentence_reasons(
    regions: Sequence[str],
    numbers: Sequence[int],
    values: Sequence[float | None],
    packed: dict[str, Any] | None,
    model_kind: str,
) -> list[MissingReason | None]:
    """Per region (contents and numbers in region order, values of the page's metric),
    why its value is missing; None where it is not (or the region is empty)."""
    built = build_sentence(list(regions))
    wanted = [
        index
        for index, (start, end) in enumerate(built.spans)
        if end > start and (index >= len(values) or values[index] is None)
    ]
    reasons: list[MissingReason | None] = [None] * len(regions)
    if not wanted:
        return reasons
    if packed is None:
        for index in wanted:
            reasons[index] = MissingReason(
                "unknown",
                "reason unknown: this evaluation was scored before Gym kept tokens",
            )
        return reasons
    tokens = unpack_tokens(packed)
    offsets = [(t.start or 0, t.end or 0) for t in tokens]
    gaps = region_gaps(built.text, built.spans, offsets)
    owners, _straddling = align_tokens(built.text, built.spans, offsets)
    for index in wanted:
        gap = gaps[index]
        if gap is not None and gap.kind == "uncovered":
            reasons[index] = _uncovered(gap.uncovered, model_kind)
        elif gap is not None and gap.token is not None:
            first, last = numbers[gap.regions[0]], numbers[gap.regions[1]]
            token = tokens[gap.token]
            start, end = offsets[gap.token]
            characters = " ".join(built.text[start:end].split()) or token.text
            reasons[index] = MissingReason(
                "straddled",
                f"absorbed by a token that straddles regions {first}-{last}: "
                f"'{characters}' begins in region {first}",
                f"{first}-{last}",
            )
        else:
            silent = [
                position
                for position, (token, owner) in enumerate(zip(tokens, owners, strict=True))
                if owner == index and token.surprisal is None
            ]
            if silent:
                start, end = offsets[silent[0]]
                first = silent[0] == 0
                reasons[index] = MissingReason(
                    "no_surprisal",
                    f"its token '{built.text[start:end].strip()}' has no surprisal"
                    + (
                        ": it is the sentence's first token and the model has no "
                        "beginning-of-sentence token to condition it on"
                        if first
                        else ""
                    ),
                )
            else:
                reasons[index] = MissingReason("unknown", "reason unknown")
    return reasons


@dataclass
class MissingSummary:
    """Missing region values of an evaluation, counted by reason (for the result page)."""

    counts: Counter[str] = field(default_factory=Counter)
    # Per reason, its details with their counts: the characters no token covers, the
    # regions a straddling token spans.
    details: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, reason: MissingReason) -> None:
        self.counts[reason.kind] += 1
        if reason.detail:
            self.details.setdefault(reason.kind, Counter())[reason.detail] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def rows(self) -> list[dict[str, Any]]:
        """Per reason (in the order of KINDS): its kind, label, count and details, as
        "',' (20)" or "regions 2-3 (4)"."""
        return [
            {
                "kind": kind,
                "label": LABELS[kind],
                "count": self.counts[kind],
                "details": ", ".join(
                    f"{_quoted(detail.split()) if kind == 'uncovered' else 'regions ' + detail}"
                    f" ({count})"
                    for detail, count in sorted(
                        self.details.get(kind, Counter()).items(), key=lambda kv: (-kv[1], kv[0])
                    )
                ),
            }
            for kind in KINDS
            if self.counts[kind]
        ]
