"""Minimal-pair sets in the database: the import use case (one transaction) and the
reads that pages, the API and the exporter share."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, models, transaction
from django.db.models import QuerySet

from suites.catalog import COMMON_SORTS, catalog_filter
from suites.catalog_services import (
    DataInvalid,
    change_check,
    description_problem,
    name_problem,
    tag_problems,
    tags_set,
    upload_limits,
    upload_name,
)
from suites.formats import minimal_pairs as mp
from suites.formats import pair_datasets
from suites.minimal_pairs import lm_eval
from suites.models import MinimalPairSet, PairSetSentence, PairSetVersion

BULK_BATCH = 2000


class PairSetInvalid(DataInvalid):
    """The set cannot be saved; `errors` lists every problem. Nothing was written."""

    errors: list[mp.PairSetError]


@dataclass
class PairSetReport:
    pair_set: MinimalPairSet
    source_format: str
    warnings: list[str] = field(default_factory=list)
    changed: bool = True  # False: a replace with the same content (nothing written)
    # The name asked for, when the set was saved under a free one instead.
    renamed_from: str = ""


# Names that the set pages' URLs use for themselves.
RESERVED_NAMES = {"upload"}


def _name_errors(
    name: str,
    replace: MinimalPairSet | None = None,
    tags: Iterable[str] | None = None,
    description: str | None = None,
) -> list[mp.PairSetError]:
    """What is wrong with the set's name and, when given, its tags and description."""
    problem = name_problem(name=name, model=MinimalPairSet, noun="minimal-pair set",
                           replace=replace, reserved=RESERVED_NAMES)  # fmt: skip
    errors = [mp.PairSetError(None, "name", problem)] if problem else []
    if tags is not None:
        errors += [
            mp.PairSetError(None, "tags", message)
            for message in tag_problems(tags, noun="minimal-pair set")
        ]
    if description is not None and (problem := description_problem(description)):
        errors.append(mp.PairSetError(None, "description", problem))
    return errors


def minimal_pair_set_import(
    *,
    data: str | bytes,
    name: str,
    owner: Any,
    filename: str = "",
    description: str = "",
    tags: Iterable[str] = (),
    drop_incomplete_pairs: bool = False,
    rename_if_taken: bool = False,
    file_format: str = "",
    parsed: mp.MinimalPairSet | None = None,
    metric: str = "",
) -> PairSetReport:
    """Validate a minimal-pair file (any format of suites/formats/pair_datasets.py,
    detected, or named by `file_format`) and save it as a set, all or nothing. Raises PairSetInvalid with every error found. `drop_incomplete_pairs`
    leaves out (with a warning) the pairs that lack an expected or an unexpected
    sentence, as NLPScholar does, instead of refusing the file. `rename_if_taken`: a
    taken name becomes the first free '<name> (2)', … (`renamed_from` keeps the asked).
    `parsed`: the set already read (an lm-eval task folder), `data` unused; `metric`: the
    set's metric instead of its format's."""
    if parsed is None:
        parsed = _parse(data, filename, drop_incomplete_pairs, file_format)
    asked = name
    name = upload_name(MinimalPairSet, name, rename_if_taken=rename_if_taken)
    tags = list(tags)
    errors = _name_errors(name, tags=tags, description=description)
    if errors:
        raise PairSetInvalid(errors)
    try:
        with transaction.atomic():
            pair_set = MinimalPairSet.objects.create(
                name=name,
                owner=owner,
                description=description,
                source_format=parsed.source_format,
                metric=metric or parsed.metric or mp.format_metric(parsed.source_format),
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
        pair_set=pair_set,
        source_format=parsed.source_format,
        warnings=parsed.warnings,
        renamed_from=asked if name != asked else "",
    )


def _parse(
    data: str | bytes, filename: str, drop_incomplete_pairs: bool, file_format: str
) -> mp.MinimalPairSet:
    if file_format == lm_eval.UPLOAD_FORMAT or (
        isinstance(data, bytes) and data.startswith(ZIP_MAGIC)
    ):
        return _parse_task_zip(data)
    try:
        parsed = pair_datasets.read_pair_dataset(
            data,
            filename=filename,
            file_format=file_format,
            drop_incomplete_pairs=drop_incomplete_pairs,
            limits=upload_limits(),
        )
    except mp.MinimalPairFormatError as exc:
        raise PairSetInvalid(exc.errors) from None
    if not parsed.dropped_pairs:
        return parsed
    # A stored set holds only what it is analysed on: the left-out pairs' sentences go
    # (the warning, kept with the set, names them).
    dropped = set(parsed.dropped_pairs)
    kept = [s for s in parsed.sentences if (s.pairid or "") not in dropped]
    return dataclasses.replace(parsed, sentences=kept, dropped_pairs=[])


ZIP_MAGIC = b"PK\x03\x04"


def _parse_task_zip(data: str | bytes) -> mp.MinimalPairSet:
    """A zipped lm-eval task folder (suites.minimal_pairs.lm_eval) as a set; what it
    cannot represent is refused, located at the file and setting."""
    if not isinstance(data, bytes) or not data.startswith(ZIP_MAGIC):
        raise PairSetInvalid(
            [mp.PairSetError(None, "file", "an lm-eval task folder is uploaded as a zip")]
        )
    limits = upload_limits()
    try:
        return lm_eval.task_from_files(lm_eval.zip_files(data, limits), limits=limits).pair_set
    except lm_eval.LmEvalTaskInvalid as bad:
        raise PairSetInvalid([mp.PairSetError(None, bad.where or None, str(bad))]) from None
    except mp.MinimalPairFormatError as exc:
        raise PairSetInvalid(exc.errors) from None


def minimal_pair_set_replace(
    *,
    pair_set: MinimalPairSet,
    user: Any,
    data: str | bytes,
    filename: str = "",
    name: str | None = None,
    description: str | None = None,
    tags: Iterable[str] | None = None,
    drop_incomplete_pairs: bool = False,
    rename_if_taken: bool = False,
    file_format: str = "",
) -> PairSetReport:
    """Swap a set's sentences for a new upload (owner or staff), validated as an upload
    and all or nothing. Name, description and tags stay unless given (a new name taken
    by another set becomes a free one with `rename_if_taken`). Runs stay, on the old
    content hash (outdated): the old sentences are kept in a PairSetVersion so that
    their analysis reads what they were scored on. The same content writes nothing."""
    change_check(user, pair_set, what="the set", verb="replace")
    parsed = _parse(data, filename, drop_incomplete_pairs, file_format)
    asked = pair_set.name if name is None else name
    new_name = upload_name(MinimalPairSet, asked, rename_if_taken=rename_if_taken, replace=pair_set)
    tags = None if tags is None else list(tags)
    errors = _name_errors(new_name, replace=pair_set, tags=tags, description=description)
    if errors:
        raise PairSetInvalid(errors)
    report = PairSetReport(pair_set, parsed.source_format, parsed.warnings)
    report.renamed_from = asked if new_name != asked else ""
    if mp.content_hash(parsed) == pair_set.content_hash:
        report.changed = False
        return report
    try:
        with transaction.atomic():
            # Locked: a concurrent replace waits, then keeps what this one wrote.
            locked = MinimalPairSet.objects.select_for_update().get(pk=pair_set.pk)
            pair_set.content_hash = locked.content_hash
            _version_keep(pair_set)
            _content_swap(pair_set, parsed, name=new_name, description=description)
            if tags is not None:
                tags_set(target=pair_set, raw=tags)
    except IntegrityError:
        raise PairSetInvalid(_name_errors(new_name, replace=pair_set)) from None
    return report


def _version_keep(pair_set: MinimalPairSet) -> None:
    """Keep the set's current sentences where runs on them exist (once per content)."""
    kept = pair_set.versions.filter(content_hash=pair_set.content_hash).exists()
    if kept or not pair_set.evaluations.filter(content_hash=pair_set.content_hash).exists():
        return
    data = pair_set_data(pair_set)
    PairSetVersion.objects.create(
        pair_set=pair_set,
        content_hash=pair_set.content_hash,
        columns=data.columns,
        condition_columns=data.condition_columns,
        source_format=data.source_format,
        sentences=[
            [s.sentid, s.sentence, s.pairid, s.comparison, s.roi, s.conditions]
            for s in data.sentences
        ],
    )


def _content_swap(
    pair_set: MinimalPairSet, parsed: mp.MinimalPairSet, *, name: str, description: str | None
) -> None:
    pair_set.name = name
    if description is not None:
        pair_set.description = description
    pair_set.source_format = parsed.source_format
    pair_set.columns = parsed.columns
    pair_set.condition_columns = parsed.condition_columns
    pair_set.import_warnings = parsed.warnings
    pair_set.content_hash = mp.content_hash(parsed)
    pair_set.sentence_count = len(parsed.sentences)
    pair_set.pair_count = len(parsed.pairs())
    pair_set.save()
    pair_set.sentences.all().delete()
    _insert_sentences(pair_set, parsed)


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
    fields: list[models.Field[Any, Any]] = []
    for name in names:
        field = meta.get_field(name)
        assert isinstance(field, models.Field)  # the table's own columns, no reverse relation
        fields.append(field)
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


def pair_set_data_at(pair_set: MinimalPairSet, content_hash: str) -> mp.MinimalPairSet:
    """The set's sentences as they were under `content_hash` (a run's own content): the
    current rows, or the version kept when the set was replaced. Raises
    PairSetVersion.DoesNotExist where neither holds them."""
    if content_hash == pair_set.content_hash:
        return pair_set_data(pair_set)
    version = pair_set.versions.get(content_hash=content_hash)
    return mp.MinimalPairSet(
        sentences=[
            mp.PairSentence(
                sentid=sentid,
                sentence=sentence,
                pairid=pairid,
                comparison=comparison,
                roi=tuple(roi) if roi is not None else None,
                conditions=dict(conditions),
                row=position + 2,
            )
            for position, (sentid, sentence, pairid, comparison, roi, conditions) in enumerate(
                version.sentences
            )
        ],
        columns=list(version.columns),
        condition_columns=list(version.condition_columns),
        source_format=version.source_format,
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
