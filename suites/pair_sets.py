"""Minimal-pair sets in the database: the import use case (one transaction) and the
reads that pages, the API and the exporter share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet

from suites.catalog import COMMON_SORTS, catalog_filter
from suites.formats import minimal_pairs as mp
from suites.models import MinimalPairSet, PairSetSentence
from suites.services import DataInvalid, name_problem, tags_set

BULK_BATCH = 2000


class PairSetInvalid(DataInvalid):
    """The set cannot be saved; `errors` lists every problem. Nothing was written."""

    errors: list[mp.PairSetError]


@dataclass
class PairSetReport:
    pair_set: MinimalPairSet
    source_format: str
    warnings: list[str] = field(default_factory=list)


# Names that the set pages' URLs use for themselves.
RESERVED_NAMES = {"upload"}


def _name_errors(name: str) -> list[mp.PairSetError]:
    problem = name_problem(name=name, model=MinimalPairSet, noun="minimal-pair set",
                           reserved=RESERVED_NAMES)  # fmt: skip
    return [mp.PairSetError(None, "name", problem)] if problem else []


def minimal_pair_set_import(
    *,
    data: str | bytes,
    name: str,
    owner: Any,
    filename: str = "",
    description: str = "",
    tags: Iterable[str] = (),
) -> PairSetReport:
    """Validate an NLPScholar TSV or BLiMP JSONL file and save it as a set, all or
    nothing. Raises PairSetInvalid with every error found."""
    try:
        parsed = mp.parse_minimal_pairs(data, filename=filename)
    except mp.MinimalPairFormatError as exc:
        raise PairSetInvalid(exc.errors) from None
    errors = _name_errors(name)
    if errors:
        raise PairSetInvalid(errors)
    try:
        with transaction.atomic():
            pair_set = MinimalPairSet.objects.create(
                name=name,
                owner=owner,
                description=description,
                source_format=parsed.source_format,
                columns=parsed.columns,
                condition_columns=parsed.condition_columns,
                import_warnings=parsed.warnings,
                content_hash=mp.content_hash(parsed),
                sentence_count=len(parsed.sentences),
                pair_count=len(parsed.pairs()),
            )
            _insert_sentences(pair_set, parsed)
            tags_set(target=pair_set, raw=tags)
    except IntegrityError:
        # Another request took the name between the check and the insert.
        raise PairSetInvalid(
            _name_errors(name) or [mp.PairSetError(None, "name", "name taken")]
        ) from None
    return PairSetReport(
        pair_set=pair_set, source_format=parsed.source_format, warnings=parsed.warnings
    )


def _insert_sentences(pair_set: MinimalPairSet, parsed: mp.MinimalPairSet) -> None:
    """All sentences in batched multi-row INSERTs. Django's bulk_create spends ~0.1 ms
    per row building model instances, most of a BLiMP-sized import; executemany with
    each field's own database preparation (JSON for roi and conditions) writes the same
    rows in a fraction of that, inside the caller's transaction."""
    pair_index: dict[str, int] = {}
    for s in parsed.sentences:
        if s.pairid is not None:
            pair_index.setdefault(s.pairid, len(pair_index))
    meta = PairSetSentence._meta
    names = ["pair_set", "position", "sentid", "pairid", "pair_index", "comparison",
             "sentence", "roi", "conditions"]  # fmt: skip
    fields = [meta.get_field(name) for name in names]
    roi_field, conditions_field = fields[7], fields[8]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    rows = [
        (
            pair_set.pk,
            index,
            s.sentid,
            s.pairid or "",
            pair_index.get(s.pairid) if s.pairid is not None else None,
            s.comparison or "",
            s.sentence,
            roi_field.get_db_prep_save(list(s.roi) if s.roi is not None else None, connection),
            conditions_field.get_db_prep_save(s.conditions, connection),
        )
        for index, s in enumerate(parsed.sentences)
    ]
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BULK_BATCH):
            cursor.executemany(sql, rows[start : start + BULK_BATCH])


# ---------------------------------------------------------------- reads

SORTS: dict[str, tuple[str, ...]] = {**COMMON_SORTS, "pairs": ("-pair_count",)}


def pair_set_list(*, q: str = "", tag: str = "", sort: str = "name") -> QuerySet[MinimalPairSet]:
    return catalog_filter(MinimalPairSet.objects.all(), q=q, tag=tag, sort=sort, sorts=SORTS)


def pair_set_data(pair_set: MinimalPairSet) -> mp.MinimalPairSet:
    """The stored set in the format layer's form (for export and analysis). Plain rows,
    not model instances: building 134,000 PairSetSentence objects cost a BLiMP-sized
    set's result page more than reading them."""
    rows = pair_set.sentences.order_by("position").values_list(
        "sentid", "sentence", "pairid", "comparison", "roi", "conditions", "position"
    )
    sentences = [
        mp.PairSentence(
            sentid=sentid,
            sentence=sentence,
            pairid=pairid or None,
            comparison=comparison or None,
            roi=tuple(roi) if roi is not None else None,
            conditions=dict(conditions),
            row=position + 2,
        )
        for sentid, sentence, pairid, comparison, roi, conditions, position in rows
    ]
    return mp.MinimalPairSet(
        sentences=sentences,
        columns=list(pair_set.columns),
        condition_columns=list(pair_set.condition_columns),
        source_format=pair_set.source_format,
    )


def pair_set_export(pair_set: MinimalPairSet) -> str:
    return mp.to_tsv_text(pair_set_data(pair_set))


def pair_rows(pair_set: MinimalPairSet, *, start: int, stop: int) -> list[dict[str, Any]]:
    """Pairs number start..stop-1 (first-seen order) side by side for the set page: each
    sentence's words with ROI words marked, expected on the left, unexpected on the
    right. One query, whatever the set's size."""
    members: dict[int, list[PairSetSentence]] = {}
    for s in pair_set.sentences.filter(pair_index__gte=start, pair_index__lt=stop).order_by(
        "position"
    ):
        members.setdefault(s.pair_index or 0, []).append(s)
    rows = []
    for index in sorted(members):
        group = members[index]
        rows.append(
            {
                "pairid": group[0].pairid,
                "conditions": group[0].conditions,
                "expected": [_words(s) for s in group if s.comparison == mp.EXPECTED],
                "unexpected": [_words(s) for s in group if s.comparison == mp.UNEXPECTED],
            }
        )
    return rows


def folded_words(sentence: str) -> list[tuple[str, bool]]:
    """The sentence's words as the analysis numbers them by default (punctuation
    `previous`: each punctuation mark joins the word before it, or the first word when
    none comes before): (text, is punctuation only) per word."""
    words = mp.split_words(sentence)
    groups: list[list[mp.Word]] = []
    pending: list[mp.Word] = []
    for word in words:
        if word.punctuation:
            if groups:
                groups[-1].append(word)
            else:
                pending.append(word)
        else:
            groups.append([*pending, word])
            pending = []
    if pending:
        groups.append(pending)
    return [
        (sentence[group[0].start : group[-1].end], all(w.punctuation for w in group))
        for group in groups
    ]


def _words(sentence: PairSetSentence) -> dict[str, Any]:
    roi = set(sentence.roi or ())
    return {
        "sentid": sentence.sentid,
        "words": [
            {"text": text, "roi": i in roi, "position": i}
            for i, (text, _) in enumerate(folded_words(sentence.sentence))
        ],
        "whole": sentence.roi is None,
    }
