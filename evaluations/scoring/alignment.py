"""From regions to one sentence string, and from token offsets back to regions.

The tokenizer always sees the whole sentence (tokenization is not additive across
region boundaries); regions are recovered afterwards from character offsets, so the
same rule serves byte-level BPE ("Ġ"), SentencePiece ("▁") and WordPiece ("##").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

# What a token whose characters fall in several regions contributes to them:
# - "missing" (default): all of it to the region of its first non-space character; a
#   non-empty region left without any token has no value (never 0 bits);
# - "split": its surprisal is divided among the regions it touches in proportion to its
#   non-space characters in each, so every region holding characters gets a value.
STRADDLING_RULES = ("missing", "split")


class BuiltSentence(NamedTuple):
    text: str  # the regions joined
    spans: list[tuple[int, int]]  # per region, its characters in `text`


def build_sentence(regions: Sequence[str]) -> BuiltSentence:
    """Join regions the SyntaxGym way and return the string with one span per region.

    Each region is stripped, empty regions are dropped from the string and the rest are
    joined with single spaces. An empty region gets the empty span at the point where it
    would have been, so spans stay in region order.
    """
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    for region in regions:
        content = region.strip()
        if not content:
            spans.append((length, length))
            continue
        if parts:
            length += 1  # the joining space
        spans.append((length, length + len(content)))
        parts.append(content)
        length += len(content)
    return BuiltSentence(" ".join(parts), spans)


def char_regions(text: str, spans: Sequence[tuple[int, int]]) -> list[int]:
    """Region index of every character of `text`; -1 for the joining spaces."""
    owner = [-1] * len(text)
    for index, (start, end) in enumerate(spans):
        for pos in range(start, end):
            owner[pos] = index
    return owner


def anchor_char(text: str, start: int, end: int) -> int | None:
    """The character that decides a token's region.

    The token's first non-space character. A token made of spaces only (a lone "▁" or
    "Ġ" before a piece it could not merge with) belongs with the word it introduces,
    so look right of it first, then left.
    """
    for pos in range(start, min(end, len(text))):
        if not text[pos].isspace():
            return pos
    for pos in range(max(end, start), len(text)):
        if not text[pos].isspace():
            return pos
    for pos in range(min(start, len(text)) - 1, -1, -1):
        if not text[pos].isspace():
            return pos
    return None


def align_tokens(
    text: str, spans: Sequence[tuple[int, int]], offsets: Sequence[tuple[int, int]]
) -> tuple[list[int | None], int]:
    """Region of each token (by its first non-space character) and the straddle count.

    A token straddles when its non-space characters fall in more than one region.
    """
    owner = char_regions(text, spans)
    regions: list[int | None] = []
    straddling = 0
    for start, end in offsets:
        anchor = anchor_char(text, start, end)
        if anchor is None:
            regions.append(None)
            continue
        region = owner[anchor]
        regions.append(region if region >= 0 else None)
        touched = {owner[pos] for pos in range(start, min(end, len(text))) if owner[pos] >= 0}
        if len(touched) > 1:
            straddling += 1
    return regions, straddling


def token_shares(
    text: str, spans: Sequence[tuple[int, int]], offsets: Sequence[tuple[int, int]]
) -> list[dict[int, int]]:
    """Per token, the regions its non-space characters fall in, with how many in each.

    What the "split" rule for straddling tokens divides a token's surprisal by. A token
    with no non-space character of its own (a lone "▁") gets an empty dict.
    """
    owner = char_regions(text, spans)
    shares: list[dict[int, int]] = []
    for start, end in offsets:
        counts: dict[int, int] = {}
        for pos in range(start, min(end, len(text))):
            if owner[pos] >= 0 and not text[pos].isspace():
                counts[owner[pos]] = counts.get(owner[pos], 0) + 1
        shares.append(counts)
    return shares


class RegionGap(NamedTuple):
    """Why a non-empty region received no token.

    - "straddled": a token that begins in an earlier region covers its characters;
      `token` is that token and `regions` the first and last region it touches;
    - "uncovered": no token covers its characters (the tokenizer dropped them);
      `uncovered` holds them, one space between separate runs.
    """

    kind: str
    uncovered: str
    token: int | None
    regions: tuple[int, int]


def region_gaps(
    text: str, spans: Sequence[tuple[int, int]], offsets: Sequence[tuple[int, int]]
) -> list[RegionGap | None]:
    """Per region, why it received no token (None for a region that received one, and for
    an empty region, which needs none)."""
    owner = char_regions(text, spans)
    anchored = {region for region in align_tokens(text, spans, offsets)[0] if region is not None}
    covering: list[int | None] = [None] * len(text)
    for index, (start, end) in enumerate(offsets):
        for pos in range(max(start, 0), min(end, len(text))):
            if covering[pos] is None:
                covering[pos] = index
    gaps: list[RegionGap | None] = []
    for region, (start, end) in enumerate(spans):
        if end <= start or region in anchored:
            gaps.append(None)
            continue
        straddler = next(
            (
                covering[pos]
                for pos in range(start, end)
                if covering[pos] is not None and not text[pos].isspace()
            ),
            None,
        )
        if straddler is not None:
            first, last = offsets[straddler]
            touched = [
                owner[pos]
                for pos in range(first, min(last, len(text)))
                if owner[pos] >= 0 and not text[pos].isspace()
            ]
            gaps.append(RegionGap("straddled", "", straddler, (min(touched), max(touched))))
            continue
        left = "".join(text[pos] if covering[pos] is None else " " for pos in range(start, end))
        gaps.append(RegionGap("uncovered", " ".join(left.split()), None, (region, region)))
    return gaps
