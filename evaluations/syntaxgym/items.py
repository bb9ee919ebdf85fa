"""Reads for one item of one done evaluation: what the item page and the item API show
(each condition's sentence with its regions, region values, tokens with their
surprisals, and every prediction's outcome with the values of its comparisons)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluations.models import ITEM_ROWS_SHOWN, Evaluation, EvaluationSnapshot, ItemResult
from evaluations.scoring.alignment import align_tokens, build_sentence
from evaluations.scoring.metrics import region_metrics
from evaluations.syntaxgym.missing import MissingReason, sentence_reasons
from evaluations.token_data import StoredToken, unpack_tokens
from suites.formats import canonical, predictions

# Item numbers are 32-bit integers in the database; anything outside is no item (and
# PostgreSQL would refuse to compare with it).
ITEM_NUMBER_LIMIT = 2**31 - 1
# What tokenizers write for a space or a word start; shown only in a token's title.
_MARKS = {"Ġ": " ", "▁": " ", "Ċ": "\n"}


@dataclass
class Token:
    """A token as pages show it: its characters in the sentence (no Ġ/▁ marks), the
    tokenizer's own spelling, offsets, region number and surprisal in bits."""

    text: str
    piece: str
    start: int | None
    end: int | None
    surprisal: float | None
    region: int | None = None
    region_name: str = ""
    # Surprisal as a share of the item's highest (0..1), for shading.
    heat: float = 0.0


@dataclass
class Piece:
    """A stretch of a region's characters as the page shows them: one token's, or the
    characters between its tokens (a space, or what no token covers), taken from the
    sentence, so that a region reads as it was written whatever the tokenizer."""

    text: str
    token: Token | None = None


@dataclass
class Region:
    number: int
    name: str
    content: str
    # Character span in the sentence (empty for an empty region).
    start: int
    end: int
    # The suite's metric (bits); None where missing.
    value: float | None
    values: dict[str, float | None] = field(default_factory=dict)
    tokens: list[Token] = field(default_factory=list)
    # Its characters, token by token with the gaps between them (empty without tokens).
    pieces: list[Piece] = field(default_factory=list)
    # Why `value` is missing (None where it is not).
    missing: MissingReason | None = None


@dataclass
class Condition:
    name: str
    sentence: str
    regions: list[Region]
    # None when this evaluation did not store tokens (evaluated before they were kept).
    tokens: list[Token] | None
    # The suite's metric over the whole sentence, from the stored tokens.
    sentence_value: float | None = None


@dataclass
class Prediction:
    position: int
    formula: str
    outcome: bool | None
    comparisons: list[predictions.ComparisonSides]


@dataclass
class ItemPage:
    evaluation: Evaluation
    item_number: int
    passed: bool | None
    metric: str
    conditions: list[Condition]
    predictions: list[Prediction]
    region_names: dict[int, str]
    tokens_stored: bool
    # Neighbours in the suite's item order (None at either end), and the next failing one.
    previous: int | None = None
    next: int | None = None
    next_failing: int | None = None
    position: int = 0
    count: int = 0


def item_result(evaluation: Evaluation, item_number: int) -> ItemResult | None:
    """The stored row of one item, or None for a number the evaluation has no item for."""
    if not -ITEM_NUMBER_LIMIT <= item_number <= ITEM_NUMBER_LIMIT:
        return None
    return evaluation.item_results.filter(ITEM_ROWS_SHOWN, item_number=item_number).first()


def _snapshot_parts(evaluation: Evaluation, row: ItemResult) -> dict[str, Any]:
    """What the item page needs of the suite as evaluated: its region names, predictions
    and this one item, read by JSON path (a large suite's whole snapshot takes seconds to
    decode). The item is the one at the row's position, as the store wrote them."""
    item, region_meta, formulas = (
        EvaluationSnapshot.objects.filter(pk=evaluation.pk)
        .values_list(
            f"content__items__{row.position}", "content__region_meta", "content__predictions"
        )
        .get()
    )
    if not isinstance(item, dict) or item.get("item_number") != row.item_number:
        items = evaluation.snapshot.get("items", [])
        item = next((i for i in items if i["item_number"] == row.item_number), {})
    return {"items": [item], "region_meta": region_meta or {}, "predictions": formulas or []}


def item_page(evaluation: Evaluation, row: ItemResult) -> ItemPage:
    """Everything the item page of one item shows. Six small queries."""
    snapshot = _snapshot_parts(evaluation, row)
    metric = evaluation.metric
    names = canonical.region_names(snapshot)
    numbers = sorted(int(k) for k in snapshot["region_meta"])
    region_names = dict(zip(numbers, names, strict=True))
    item = snapshot["items"][0]
    stored = row.tokens
    kind = str((evaluation.model_info or {}).get("kind") or evaluation.model.kind)
    conditions = [
        _condition(
            c,
            row.values or {},
            None if stored is None else stored.get(c["condition_name"]),
            region_names,
            metric,
            kind,
        )
        for c in item.get("conditions", [])
    ]
    _shade([t for c in conditions for t in c.tokens or []])
    results = evaluation.item_results.filter(ITEM_ROWS_SHOWN)
    return ItemPage(
        evaluation=evaluation,
        item_number=row.item_number,
        passed=row.passed,
        metric=metric,
        conditions=conditions,
        predictions=_predictions(snapshot, list(row.outcomes or []), _lookup(conditions, metric)),
        region_names=region_names,
        tokens_stored=row.tokens is not None,
        previous=_neighbour(results.filter(position__lt=row.position).order_by("-position")),
        next=_neighbour(results.filter(position__gt=row.position).order_by("position")),
        next_failing=_neighbour(
            results.filter(position__gt=row.position, passed=False).order_by("position")
        ),
        position=row.position + 1,
        count=results.count(),
    )


def _predictions(
    snapshot: dict[str, Any], outcomes: list[bool | None], lookup: Any
) -> list[Prediction]:
    """The suite's predictions with this item's stored outcome and the values each
    comparison read (recomputed from the stored values, for reading only)."""
    formulas = [p["formula"] for p in snapshot.get("predictions", [])]
    return [
        Prediction(
            position=i,
            formula=formula,
            outcome=outcomes[i] if i < len(outcomes) else None,
            comparisons=_comparisons(formula, lookup),
        )
        for i, formula in enumerate(formulas)
    ]


def _comparisons(formula: str, lookup: Any) -> list[predictions.ComparisonSides]:
    try:
        return predictions.comparison_sides(predictions.parse(formula), lookup)
    except predictions.PredictionError:
        # Stored suites hold valid formulas; one that no longer parses (the language
        # grew stricter since) still shows its stored outcome, without the values.
        return []


def _shade(tokens: list[Token]) -> None:
    """Each token's heat: its surprisal over the item's highest, so that shades compare
    across conditions."""
    highest = max((t.surprisal for t in tokens if t.surprisal is not None), default=0.0)
    for token in tokens:
        if token.surprisal is not None and highest > 0:
            token.heat = round(max(token.surprisal, 0.0) / highest, 3)


def _neighbour(rows: Any) -> int | None:
    return rows.values_list("item_number", flat=True).first()


def _condition(
    condition: dict[str, Any],
    values: dict[str, Any],
    packed: dict[str, Any] | None,
    region_names: dict[int, str],
    metric: str,
    model_kind: str,
) -> Condition:
    name = condition["condition_name"]
    ordered = sorted(condition["regions"], key=lambda r: r["region_number"])
    built = build_sentence([str(r.get("content", "")) for r in ordered])
    by_metric = values.get(name) or {}
    regions = [
        Region(
            number=r["region_number"],
            name=region_names.get(r["region_number"], ""),
            content=str(r.get("content", "")).strip(),
            start=start,
            end=end,
            value=_at(by_metric.get(metric), i),
            values={m: _at(series, i) for m, series in by_metric.items()},
        )
        for i, (r, (start, end)) in enumerate(zip(ordered, built.spans, strict=True))
    ]
    tokens = None if packed is None else _tokens(built.text, built.spans, packed, regions)
    reasons = sentence_reasons(
        [str(r.get("content", "")) for r in ordered],
        [r.number for r in regions],
        [r.value for r in regions],
        packed,
        model_kind,
    )
    for region, reason in zip(regions, reasons, strict=True):
        region.missing = reason
    sentence_value = None
    if tokens is not None:
        sentence_value = region_metrics([t.surprisal for t in tokens]).get(metric)
    return Condition(name, built.text, regions, tokens, sentence_value)


def _at(series: Any, index: int) -> float | None:
    return series[index] if isinstance(series, list) and index < len(series) else None


def _tokens(
    text: str, spans: list[tuple[int, int]], packed: dict[str, Any], regions: list[Region]
) -> list[Token]:
    """The stored tokens, each in the region of its first non-space character (the
    engine's rule), and added to that region's token list."""
    stored = unpack_tokens(packed)
    offsets = [(t.start or 0, t.end or 0) for t in stored]
    owners, _straddling = align_tokens(text, spans, offsets)
    tokens = []
    for token, owner in zip(stored, owners, strict=True):
        shown = Token(
            text=_characters(text, token),
            piece=token.text,
            start=token.start,
            end=token.end,
            surprisal=token.surprisal,
            region=regions[owner].number if owner is not None else None,
            region_name=regions[owner].name if owner is not None else "",
        )
        if owner is not None:
            regions[owner].tokens.append(shown)
        tokens.append(shown)
    covering = _covering(len(text), stored, owners)
    for index, ((start, end), region) in enumerate(zip(spans, regions, strict=True)):
        region.pieces = _pieces(text, start, end, index, region.tokens, covering)
    return tokens


def _covering(length: int, stored: list[StoredToken], owners: list[int | None]) -> list[int | None]:
    """Per character of the sentence, the region of the first token that covers it."""
    covering: list[int | None] = [None] * length
    for token, owner in zip(stored, owners, strict=True):
        if token.start is None or token.end is None:
            continue
        for pos in range(max(token.start, 0), min(token.end, length)):
            if covering[pos] is None:
                covering[pos] = owner
    return covering


def _pieces(
    text: str, start: int, end: int, region: int, tokens: list[Token], covering: list[int | None]
) -> list[Piece]:
    """The region's characters: its tokens' own, and between them the sentence's own
    characters (spaces, and what no token covers). Characters a token of another region
    covers are shown with that token, not again here; a token that shares characters with
    the one before it (bytes of one character) shows only the characters not yet shown."""
    pieces: list[Piece] = []
    cursor = start

    def gap(until: int) -> None:
        characters = "".join(
            text[pos] for pos in range(cursor, min(until, end)) if covering[pos] in (None, region)
        )
        if not pieces:
            # What is left after another region's token took the region's first word.
            characters = characters.lstrip()
        if characters:
            pieces.append(Piece(characters))

    for token in tokens:
        if token.start is None or token.end is None or not 0 <= token.start <= token.end:
            pieces.append(Piece(token.text, token))
            continue
        first = max(token.start, cursor)
        # Spaces a token brings from before its region (an untrimmed "Ġ" or "▁" offset)
        # are the joining space, not the region's.
        while first < start and first < token.end and text[first].isspace():
            first += 1
        gap(first)
        pieces.append(
            Piece(text[first : token.end] if token.end <= len(text) else token.text, token)
        )
        cursor = max(cursor, token.end)
    gap(end)
    return pieces


def _characters(text: str, token: StoredToken) -> str:
    """The token's own characters: its slice of the sentence, or, without usable offsets,
    its spelling with the tokenizer's space marks turned back into spaces."""
    if token.start is not None and token.end is not None and 0 <= token.start < token.end:
        if token.end <= len(text):
            return text[token.start : token.end]
    spelled = "".join(_MARKS.get(ch, ch) for ch in token.text)
    return spelled.removeprefix("##")


def _lookup(conditions: list[Condition], metric: str) -> Any:
    by_name = {c.name: c for c in conditions}

    def value(region: int | None, condition: str) -> float | None:
        found = by_name.get(condition)
        if found is None:
            return None
        if region is None:
            return found.sentence_value
        return next((r.value for r in found.regions if r.number == region), None)

    return value


def item_data(page: ItemPage) -> dict[str, Any]:
    """The item as the API gives it: region values per metric and the packed token
    arrays per condition (null when the evaluation did not store them)."""
    return {
        "evaluation": page.evaluation.pk,
        "item_number": page.item_number,
        "units": "bits",
        "metric": page.metric,
        "passed": page.passed,
        "tokens_stored": page.tokens_stored,
        "predictions": [
            {
                "formula": p.formula,
                "outcome": p.outcome,
                "comparisons": [
                    {
                        "left": c.left_text,
                        "op": c.op,
                        "right": c.right_text,
                        "left_value": c.left,
                        "right_value": c.right,
                    }
                    for c in p.comparisons
                ],
            }
            for p in page.predictions
        ],
        "conditions": [_condition_data(c) for c in page.conditions],
        "previous": page.previous,
        "next": page.next,
    }


def _condition_data(condition: Condition) -> dict[str, Any]:
    tokens = condition.tokens
    return {
        "condition_name": condition.name,
        "sentence": condition.sentence,
        "regions": [
            {
                "region_number": r.number,
                "region_name": r.name,
                "content": r.content,
                "start": r.start,
                "end": r.end,
                "metric_value": r.values,
                "missing": None
                if r.missing is None
                else {"reason": r.missing.kind, "text": r.missing.text},
            }
            for r in condition.regions
        ],
        "tokens": None
        if tokens is None
        else {
            "text": [t.piece for t in tokens],
            "start": [t.start for t in tokens],
            "end": [t.end for t in tokens],
            "surp": [t.surprisal for t in tokens],
            "region": [t.region for t in tokens],
        },
    }
