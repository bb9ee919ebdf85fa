"""Minimal-pair data sets in the shapes researchers keep them, read into the one form of
suites/formats/minimal_pairs.py.

A format is a *shape* (which fields hold the two sentences, which field names the
paradigm) in a *container* (TSV, JSON Lines, Parquet, plain text lines). The shape is
detected from the content, or chosen by name; the container always comes from the
content. The recorded format is `<shape>-<container>` (`blimp-jsonl`, `jblimp-parquet`,
`zorro-txt`, ...), so NLPScholar TSV and BLiMP JSONL keep the names they had.

Pure Python, no Django; pyarrow is imported only for a Parquet file.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, NoReturn

from suites.formats import minimal_pairs as mp
from suites.formats import parquet_footer
from suites.formats.limits import (
    DEFAULT_LIMITS,
    InputLimits,
    LimitExceeded,
    LineFeed,
    exceeded,
    text_lines,
    too_many_rows,
    too_many_values,
)

PARQUET_MAGIC = b"PAR1"

TSV, JSONL, PARQUET, TXT = "tsv", "jsonl", "parquet", "txt"
PARADIGM = "paradigm"  # the condition column that a file's name fills, where it has none
TRUE_FALSE = {"true": True, "false": False}
HOW_TO_CHOOSE = "(the upload page's Format, the API's `file_format`, the command's `--file-format`)"


@dataclass(frozen=True)
class Shape:
    """A data set whose records hold a grammatical and an ungrammatical sentence."""

    name: str
    label: str  # the data sets it covers, for pages and messages
    good: str  # the field that becomes the expected sentence
    bad: str  # ... the unexpected one
    paradigm_fields: tuple[str, ...]  # the first of these present becomes the first condition
    id_field: str = ""  # numbers the pairs when present (else the record's number)


BLIMP = Shape(
    "blimp",
    "BLiMP, BLiMP supplement, SLING, TurBLiMP, BLiMP-NL",
    "sentence_good",
    "sentence_bad",
    ("paradigm", "phenomenon", "linguistic_phenomenon", "category", "type"),
    id_field="pairID",
)
JBLIMP = Shape(
    "jblimp", "JBLiMP", "good_sentence", "bad_sentence", ("phenomenon", "paradigm", "type")
)
MULTIBLIMP = Shape(
    "multiblimp", "MultiBLiMP", "sen", "wrong_sen", ("lang", "language", "phenomenon")
)
LM_SYNEVAL = Shape(
    "lm-syneval",
    "Marvin & Linzen (LM_syneval) exports",
    "grammatical",
    "ungrammatical",
    ("case", "test_case", "template", "paradigm", "phenomenon"),
)
RECORD_SHAPES = (BLIMP, JBLIMP, MULTIBLIMP, LM_SYNEVAL)

NLPSCHOLAR = "nlpscholar"
CLAMS = "clams"
ZORRO = "zorro"
LM_EVAL = "lm-eval"

# Every format a user may name, with what it is (the upload form lists them in order).
FORMATS: dict[str, str] = {
    NLPSCHOLAR: "NLPScholar data TSV",
    BLIMP.name: f"{BLIMP.label} (sentence_good / sentence_bad)",
    JBLIMP.name: "JBLiMP (good_sentence / bad_sentence)",
    MULTIBLIMP.name: "MultiBLiMP (sen / wrong_sen)",
    LM_SYNEVAL.name: "LM_syneval export (grammatical / ungrammatical columns)",
    CLAMS: "CLAMS (True / False, sentence)",
    ZORRO: "Zorro (ungrammatical and grammatical lines in turn)",
    # Read by suites.minimal_pairs.sets (a zip of the folder), never by read_pair_dataset.
    LM_EVAL: "lm-eval task folder, zipped (BLiMP's template, local JSONL)",
}
CONTAINERS = (TSV, JSONL, PARQUET, TXT)


def format_choices() -> list[tuple[str, str]]:
    """(value, label) for a form's select: detection first."""
    return [("", "Detect from the content"), *FORMATS.items()]


def _error(message: str, *, row: int | None = None, column: str | None = None) -> NoReturn:
    raise mp.MinimalPairFormatError([mp.PairSetError(row, column, message)])


@dataclass(frozen=True)
class _Options:
    """What every reader of one upload is told."""

    filename: str
    drop_incomplete_pairs: bool
    limits: InputLimits


def shape_name(chosen: str) -> str:
    """A format's shape from what a user typed: `jblimp`, or a recorded name such as
    `jblimp-parquet` ('' = detect). Raises MinimalPairFormatError naming the choices."""
    value = chosen.strip().lower()
    if value in ("", "auto"):
        return ""
    if value in FORMATS:
        return value
    stem, _, container = value.rpartition("-")
    if container in CONTAINERS and stem in FORMATS:
        return stem
    _error(
        f"unknown format {chosen!r}; leave it empty to detect the format from the content, "
        f"or name one of: {', '.join(FORMATS)}",
        column="file_format",
    )


# ---------------------------------------------------------------- the entry point


def read_pair_dataset(
    data: str | bytes,
    *,
    filename: str = "",
    file_format: str = "",
    drop_incomplete_pairs: bool = False,
    limits: InputLimits = DEFAULT_LIMITS,
) -> mp.MinimalPairSet:
    """Read a minimal-pair file of any format Gym knows. `file_format` names the shape
    (see FORMATS; '' detects it). The file's name only helps: `.jsonl`/`.json` reads
    JSON Lines, and its stem names the paradigm of a file that carries none. Lines,
    rows, fields and values are held to `limits` as they are read. Raises
    MinimalPairFormatError with every problem found (the first limit met, if one is)."""
    try:
        return _read(data, filename, file_format, drop_incomplete_pairs, limits)
    except LimitExceeded as exc:
        raise mp.MinimalPairFormatError.of(exc) from None


def _read(
    data: str | bytes,
    filename: str,
    file_format: str,
    drop_incomplete_pairs: bool,
    limits: InputLimits,
) -> mp.MinimalPairSet:
    shape = shape_name(file_format)
    if shape == LM_EVAL:
        _error(
            "an lm-eval task folder is read as a zipped upload of a set or with "
            "`manage.py import_lm_eval FOLDER`, not as a file of pairs",
            column="file_format",
        )
    opts = _Options(filename, drop_incomplete_pairs, limits)
    suffix = PurePosixPath(filename).suffix.lower()
    if isinstance(data, bytes) and data.startswith(PARQUET_MAGIC):
        if shape in (NLPSCHOLAR, CLAMS, ZORRO):
            shapes = ", ".join(s.name for s in RECORD_SHAPES)
            _error(
                f"the file is Parquet, but the format {shape} is text; choose a format "
                f"whose records hold two sentences: {shapes}"
            )
        return _from_records(_parquet_records(data, limits), shape, PARQUET, "row", opts)
    if suffix == ".parquet":
        _error(
            "the file's name ends in .parquet, but it does not start as a Parquet file "
            "does (the bytes PAR1); upload the .parquet file itself"
        )
    text = mp.decode_text(data)
    if not shape:
        shape = _detect_text(text, suffix, limits)
    if shape == NLPSCHOLAR:
        return mp.parse_nlpscholar_tsv(
            text, drop_incomplete_pairs=drop_incomplete_pairs, limits=limits
        )
    if shape == CLAMS:
        return _read_clams(text, opts)
    if shape == ZORRO:
        return _read_zorro(text, opts)
    chosen = _shape(shape)
    if _looks_like_jsonl(text) or suffix in (".jsonl", ".json") or chosen is not LM_SYNEVAL:
        return _from_records(mp.jsonl_records(text, limits), shape, JSONL, "line", opts)
    return _from_records(_tsv_records(text, limits), shape, TSV, "row", opts)


def _shape(name: str) -> Shape:
    return next(s for s in RECORD_SHAPES if s.name == name)


def _first_char(text: str) -> str:
    """The first character that is not white space ('' for none), the text not copied."""
    found = _NOT_SPACE.search(text)
    return found.group() if found else ""


_NOT_SPACE = re.compile(r"\S")


def _looks_like_jsonl(text: str) -> bool:
    return _first_char(text) in ("{", "[")


def _detect_text(text: str, suffix: str, limits: InputLimits) -> str:
    """The shape of a text file, from its first line (and, for JSON Lines, the fields of
    its first object)."""
    first_char = _first_char(text)
    if not first_char:
        _error("the file is empty")
    if first_char == "[" and suffix not in (".tsv", ".txt"):
        _error(
            "the file is one JSON array; Gym reads JSON Lines, one object (one pair) a line. "
            "Hugging Face datasets writes them with `Dataset.to_json(path)`, pandas with "
            "`to_json(path, orient='records', lines=True)`"
        )
    if first_char == "{" or suffix in (".jsonl", ".json"):
        return _detect_jsonl(text, limits)
    lines = _text_lines(text, limits)
    number, first = next(lines)
    cells = [cell.strip() for cell in first.split("\t")]
    if len(cells) == 1:
        if any("\t" in line for _, line in lines):
            return NLPSCHOLAR  # its reader says what the header lacks
        return ZORRO
    header = set(cells)
    nlpscholar = {mp.SENTID, mp.SENTENCE} <= header
    syneval = {LM_SYNEVAL.good, LM_SYNEVAL.bad} <= header
    if nlpscholar and syneval:
        _error(
            f"line {number} could be the header of an NLPScholar TSV (it has `sentid` and "
            "`sentence`) or of an LM_syneval export (it has `grammatical` and "
            f"`ungrammatical`); choose the format nlpscholar or lm-syneval {HOW_TO_CHOOSE}",
            row=number,
        )
    if syneval:
        return LM_SYNEVAL.name
    if len(cells) == 2 and cells[0].lower() in TRUE_FALSE:
        return CLAMS
    return NLPSCHOLAR


def _detect_jsonl(text: str, limits: InputLimits) -> str:
    """The record shape whose two sentence fields the first object holds."""
    for number, line in _text_lines(text, limits):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            return BLIMP.name  # the reader reports the line
        if not isinstance(value, dict):
            return BLIMP.name
        return _detect_fields(list(value), f"line {number}", row=number)
    _error("the file holds no pairs")


def _detect_fields(fields: Sequence[str], where: str, *, row: int | None = None) -> str:
    matches = [s for s in RECORD_SHAPES if s.good in fields and s.bad in fields]
    if len(matches) == 1:
        return matches[0].name
    if not matches:
        # One of a shape's two fields: that shape's reader says, line by line, what is missing.
        halves = [s for s in RECORD_SHAPES if s.good in fields or s.bad in fields]
        if len(halves) == 1:
            return halves[0].name
    if matches:
        seen = "; ".join(f"`{s.good}`/`{s.bad}` ({s.name})" for s in matches)
        _error(
            f"{where} holds the sentence fields of more than one format: {seen}; choose "
            f"the format {HOW_TO_CHOOSE}",
            row=row,
        )
    known = "; ".join(f"`{s.good}`/`{s.bad}` ({s.label})" for s in RECORD_SHAPES)
    shown = ", ".join(f"`{name}`" for name in fields[:12]) or "none"
    _error(
        f"{where} has the fields {shown}, but no pair of sentence fields Gym knows: "
        f"{known}. Rename the two sentence fields, or choose the format {HOW_TO_CHOOSE}",
        row=row,
    )


# ---------------------------------------------------------------- containers


def _tsv_records(
    text: str, limits: InputLimits
) -> tuple[list[tuple[int, dict[str, object]]], list[mp.PairSetError]]:
    """A TSV with a header as (line number, {column: cell}) rows (quotes as NLPScholar's)."""
    feed = LineFeed(text, limits)
    reader = csv.reader(feed, delimiter="\t", quotechar='"')
    header: list[str] | None = None
    records: list[tuple[int, dict[str, object]]] = []
    errors = mp.ErrorList()
    try:
        for fields in reader:
            feed.record(fields, header)
            if not any(cell.strip() for cell in fields):
                continue
            if header is None:
                header = [cell.strip() for cell in fields]
                errors.extend(_header_errors(header))
                continue
            if len(fields) != len(header):
                errors.append(
                    mp.PairSetError(
                        reader.line_num,
                        None,
                        f"{len(fields)} fields where the header has {len(header)}; a tab "
                        "inside a cell needs the cell in double quotes",
                    )
                )
                continue
            records.append((reader.line_num, dict(zip(header, fields, strict=True))))
    except csv.Error as exc:
        _error(f"cannot read the TSV here: {exc}", row=reader.line_num)
    if header is None:
        _error("the file is empty")
    return records, errors


def _header_errors(header: list[str]) -> list[mp.PairSetError]:
    errors: list[mp.PairSetError] = []
    seen: set[str] = set()
    for index, name in enumerate(header):
        if not name:
            errors.append(mp.PairSetError(1, f"#{index + 1}", "a column has no name in the header"))
        elif name in seen:
            errors.append(mp.PairSetError(1, name, "the column name appears twice in the header"))
        seen.add(name)
    return errors


def _parquet_records(
    data: bytes, limits: InputLimits
) -> tuple[list[tuple[int, dict[str, object]]], list[mp.PairSetError]]:
    """(row number from 1, {column: value}) of every row of a Parquet file. What the
    file holds is checked against `limits` from its metadata before anything is read,
    then row group by row group before its values become Python's: texts are read as
    dictionaries (each distinct text once), so that a text repeated a million times is
    counted, not unpacked, until it is known to fit."""
    import pyarrow.parquet as pq

    rows: list[dict[str, object]] = []
    _parquet_footer_check(data, limits)
    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
        _parquet_census(parquet, data, limits)
        texts = [column.path for column in parquet.schema if column.physical_type == "BYTE_ARRAY"]
        parquet = pq.ParquetFile(io.BytesIO(data), read_dictionary=texts)
        budget = limits.unpacked_bytes
        for group in range(parquet.metadata.num_row_groups):
            table = parquet.read_row_group(group)
            budget -= sum(
                _unpacked_bytes(chunk) for column in table.columns for chunk in column.chunks
            )
            if budget < 0:
                raise _unpacks_to(limits, f"more than {limits.unpacked_bytes:,}")
            rows.extend(table.to_pylist())
    except (LimitExceeded, mp.MinimalPairFormatError):
        raise
    except Exception as exc:  # noqa: BLE001 - a hostile file may fail anywhere in pyarrow
        _parquet_unreadable(exc)
    # pandas' index, when a data frame was written with it, is not data.
    return [
        (number, {k: v for k, v in row.items() if not k.startswith("__index_level_")})
        for number, row in enumerate(rows, start=1)
    ], []


def _parquet_footer_check(data: bytes, limits: InputLimits) -> None:
    """Refuse a file whose metadata (its footer) is over the limit, before pyarrow reads
    it: a schema of a hundred thousand columns takes hundreds of megabytes to read."""
    size = parquet_footer.footer_size(data)
    if size > limits.parquet_meta_bytes:
        raise exceeded(
            limits,
            "parquet_meta_bytes",
            f"the Parquet file's metadata takes {size:,} bytes",
            "write it with fewer columns or larger row groups, or upload it as JSON Lines",
        )


def _parquet_census(parquet: Any, data: bytes, limits: InputLimits) -> None:
    """Refuse, from its metadata, a Parquet file with too many rows, values (lists'
    items counted: a list of a million values takes a few bytes) or bytes."""
    meta = parquet.metadata
    if meta.num_rows > limits.rows:
        raise too_many_rows(limits, meta.num_rows)
    values = parquet_footer.leaf_values(parquet_footer.footer(data))
    if values > limits.values:
        raise too_many_values(limits, f"the Parquet file holds {values:,} values")
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if size > limits.unpacked_bytes:
        raise _unpacks_to(limits, f"{size:,}")


def _unpacks_to(limits: InputLimits, size: str) -> LimitExceeded:
    return exceeded(
        limits,
        "unpacked_bytes",
        f"the Parquet file holds {size} bytes once unpacked",
        "split the data set, or upload it as JSON Lines",
    )


def _unpacked_bytes(array: Any) -> int:
    """The bytes `array` takes once its dictionaries are unpacked (an upper bound)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_dictionary(kind) and (
        pa.types.is_string(kind.value_type) or pa.types.is_binary(kind.value_type)
    ):
        lengths = pc.take(pc.binary_length(array.dictionary), array.indices)
        return int(array.indices.nbytes) + int(pc.sum(lengths).as_py() or 0)
    if pa.types.is_struct(kind):
        return sum(_unpacked_bytes(array.field(i)) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        return int(array.nbytes - array.values.nbytes) + _unpacked_bytes(array.values)
    return int(array.nbytes)


def _parquet_unreadable(exc: Exception) -> NoReturn:
    _error(
        f"cannot read the Parquet file: {str(exc)[:300]}; write it again (e.g. "
        "`Dataset.to_parquet(path)`), or upload the data set as JSON Lines"
    )


# ---------------------------------------------------------------- records of two sentences


def _from_records(
    read: tuple[list[tuple[int, dict[str, object]]], list[mp.PairSetError]],
    shape_name: str,
    container: str,
    unit: str,
    opts: _Options,
) -> mp.MinimalPairSet:
    """Pairs from records that each hold one pair: the shape's good sentence is the
    expected one, its bad one the unexpected one, every other field a condition (the
    paradigm field first). Pairs are numbered by the shape's id field, else by the
    record's line (row) number."""
    records, errors = read
    if not records and not errors:
        _error("the file holds no pairs")
    if not shape_name:
        shape_name = _detect_fields(
            list(records[0][1]), f"{unit} {records[0][0]}", row=records[0][0]
        )
    shape = _shape(shape_name)
    conditions = mp.condition_fields(records, (shape.good, shape.bad, shape.id_field), opts.limits)
    for name in conditions:
        if name in mp.RESERVED:
            errors.append(
                mp.PairSetError(
                    None,
                    name,
                    f"`{name}` is a name Gym keeps for its own columns; rename the field "
                    "(it would be a condition column)",
                )
            )
    conditions = _paradigm_first(conditions, shape)
    stem = _stem(opts.filename) if not conditions else ""
    kept = [c for c in conditions if c not in mp.RESERVED] + ([PARADIGM] if stem else [])
    rows = _record_rows(records, shape, kept, stem, errors, unit)
    return _pair_set(rows, kept, f"{shape.name}-{container}", errors, opts, one_pair_per_row=True)


def _record_rows(
    records: list[tuple[int, dict[str, object]]],
    shape: Shape,
    kept: list[str],
    stem: str,
    errors: list[mp.PairSetError],
    unit: str,
) -> Iterator[tuple[int, dict[str, str]]]:
    """The two sentences of each record as rows, made as they are read (a missing or
    wrong sentence field is an error in `errors`)."""
    sentid = 0
    for number, record in records:
        pairid = record.get(shape.id_field, number) if shape.id_field else number
        shared = {name: mp.cell_text(record.get(name)) for name in kept}
        if stem:
            shared[PARADIGM] = stem
        for key, label in ((shape.good, mp.EXPECTED), (shape.bad, mp.UNEXPECTED)):
            value = record.get(key)
            if not isinstance(value, str):
                errors.append(_missing(number, key, value, record, shape, unit))
                continue
            sentid += 1
            yield (
                number,
                {
                    mp.SENTID: str(sentid),
                    mp.PAIRID: mp.cell_text(pairid),
                    mp.COMPARISON: label,
                    mp.SENTENCE: value,
                    **shared,
                },
            )


def _missing(
    number: int, key: str, value: object, record: dict[str, object], shape: Shape, unit: str
) -> mp.PairSetError:
    if key in record:
        kind = "null" if value is None else _json_kind(value)
        return mp.PairSetError(
            number, key, f"`{key}` is {kind}, not text; it must hold the sentence as a string"
        )
    fields = ", ".join(f"`{k}`" for k in list(record)[:12]) or "none"
    return mp.PairSetError(
        number,
        key,
        f"`{key}` is missing (the {unit} has {fields}); every {unit} of a {shape.name} file "
        f"needs `{shape.good}` and `{shape.bad}`. If the file is another format, choose it "
        + HOW_TO_CHOOSE,
    )


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"


def _paradigm_first(conditions: list[str], shape: Shape) -> list[str]:
    """BLiMP's own files (with `UID`) keep their field order, as Gym always read them;
    elsewhere the first of the shape's paradigm fields present leads."""
    if shape is BLIMP and "UID" in conditions:
        return conditions
    lead = next((name for name in shape.paradigm_fields if name in conditions), None)
    if lead is None:
        return conditions
    return [lead, *(name for name in conditions if name != lead)]


def _stem(filename: str) -> str:
    return PurePosixPath(filename.replace("\\", "/")).stem if filename else ""


def _pair_set(
    rows: Iterable[tuple[int, dict[str, str]]],
    conditions: list[str],
    source_format: str,
    errors: list[mp.PairSetError],
    opts: _Options,
    *,
    one_pair_per_row: bool = False,
) -> mp.MinimalPairSet:
    columns = [mp.SENTID, mp.PAIRID, mp.COMPARISON, mp.SENTENCE, *conditions]
    # The checks every format shares (empty sentences, pairs lacking a label, ...) live
    # with the NLPScholar reader; they are one function so that all formats agree.
    return mp._build(
        rows,
        columns,
        conditions,
        source_format,
        errors,
        drop_incomplete_pairs=opts.drop_incomplete_pairs,
        one_pair_per_row=one_pair_per_row,
        limits=opts.limits,
    )


# ---------------------------------------------------------------- line formats


def _record(
    sentid: int, pairid: int, label: str, sentence: str, shared: dict[str, str]
) -> dict[str, str]:
    return {
        mp.SENTID: str(sentid),
        mp.PAIRID: str(pairid),
        mp.COMPARISON: label,
        mp.SENTENCE: sentence,
        **shared,
    }


def _text_lines(text: str, limits: InputLimits) -> Iterator[tuple[int, str]]:
    """The lines that are not blank, numbered as in the file, held to `limits`."""
    return ((n, line) for n, line in text_lines(text, limits) if line.strip())


def _read_clams(text: str, opts: _Options) -> mp.MinimalPairSet:
    """`True<TAB>sentence` starts a test case, each `False<TAB>sentence` after it is one
    pair with it (the grammatical sentence is repeated in each of its pairs). A pair is
    numbered by its ungrammatical line; a test case without one by its own line."""
    errors = mp.ErrorList()
    stem = _stem(opts.filename)
    shared = {PARADIGM: stem} if stem else {}
    rows = _clams_rows(text, opts, shared, errors)
    first = next(rows, None)
    if first is None and not errors:
        _error("the file holds no pairs")
    every = itertools.chain([first] if first else [], rows)
    return _pair_set(every, list(shared), f"{CLAMS}-{TSV}", errors, opts)


def _clams_rows(
    text: str, opts: _Options, shared: dict[str, str], errors: list[mp.PairSetError]
) -> Iterator[tuple[int, dict[str, str]]]:
    """The rows of a CLAMS file as they are read (bad lines are errors in `errors`)."""
    good: tuple[int, str] | None = None
    paired = False
    sentid = 0
    for number, line in _text_lines(text, opts.limits):
        cells = line.split("\t", 2)
        label = TRUE_FALSE.get(cells[0].strip().lower())
        if len(cells) != 2 or label is None:
            errors.append(
                mp.PairSetError(
                    number,
                    None,
                    f"a CLAMS line is `True` or `False`, a tab, then the sentence; this line "
                    f"has {_field_count(line)} tab-separated fields starting {cells[0][:40]!r}",
                )
            )
            continue
        if label:
            if good is not None and not paired:  # an incomplete pair, reported as such
                sentid += 1
                yield good[0], _record(sentid, good[0], mp.EXPECTED, good[1], shared)
            good, paired = (number, cells[1]), False
        elif good is None:
            errors.append(
                mp.PairSetError(
                    number,
                    None,
                    "an ungrammatical (`False`) sentence before any grammatical (`True`) one; "
                    "each test case starts with its `True` line",
                )
            )
        else:
            paired = True
            yield good[0], _record(sentid + 1, number, mp.EXPECTED, good[1], shared)
            yield number, _record(sentid + 2, number, mp.UNEXPECTED, cells[1], shared)
            sentid += 2
    if good is not None and not paired:
        yield good[0], _record(sentid + 1, good[0], mp.EXPECTED, good[1], shared)


def _field_count(line: str) -> int:
    return line.count("\t") + 1


def _read_zorro(text: str, opts: _Options) -> mp.MinimalPairSet:
    """Sentences one a line, in turn ungrammatical and grammatical: lines 1 and 2 are
    pair 1, 3 and 4 pair 2, ... (blank lines do not count)."""
    stem = _stem(opts.filename)
    shared = {PARADIGM: stem} if stem else {}
    lines = list(_text_lines(text, opts.limits))
    if not lines:
        _error("the file holds no pairs")
    if len(lines) % 2 and not opts.drop_incomplete_pairs:
        _error(
            f"the file has {len(lines)} sentences: Zorro files hold an ungrammatical and a "
            "grammatical line in turn, so the last one has no grammatical partner; add it, "
            "or ask to leave incomplete pairs out",
            row=lines[-1][0],
        )
    rows = (
        (number, _record(index + 1, index // 2 + 1, _ZORRO_LABELS[index % 2], line, shared))
        for index, (number, line) in enumerate(lines)
    )
    return _pair_set(rows, list(shared), f"{ZORRO}-{TXT}", mp.ErrorList(), opts)


_ZORRO_LABELS = (mp.UNEXPECTED, mp.EXPECTED)
