"""The evaluate table of a minimal-pair run: one row per token, NLPScholar's columns.

`token, sentid, word, wordpos, model, tokenizer, punctuation, prob, surp` (surp in bits,
prob = 2**-surp). Columnar (lists and numpy arrays) so that the analysis of a
BLiMP-sized table stays vectorised. Pure Python + numpy, no Django.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suites.formats.limits import DEFAULT_LIMITS, InputLimits, LimitExceeded, LineFeed
from suites.formats.minimal_pairs import (
    MinimalPairFormatError,
    PairSetError,
    cap_errors,
    decode_text,
)

COLUMNS = (
    "token",
    "sentid",
    "word",
    "wordpos",
    "model",
    "tokenizer",
    "punctuation",
    "prob",
    "surp",
)
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}
_MISSING = {"", "na", "nan", "none", "null"}


@dataclass
class TokenTable:
    token: list[str] = field(default_factory=list)
    sentid: list[str] = field(default_factory=list)
    word: list[str] = field(default_factory=list)
    wordpos: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    model: list[str] = field(default_factory=list)
    tokenizer: list[str] = field(default_factory=list)
    punctuation: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    prob: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    surp: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    # The file line of each row, for tables read from a file (empty otherwise).
    line: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.token)

    @classmethod
    def from_rows(cls, rows: Iterable[tuple]) -> TokenTable:
        """Rows in COLUMNS order (prob and surp may be None for a missing value)."""
        columns: list[list] = [[] for _ in COLUMNS]
        for row in rows:
            for target, value in zip(columns, row, strict=True):
                target.append(value)
        return cls(
            token=columns[0],
            sentid=[str(v) for v in columns[1]],
            word=columns[2],
            wordpos=np.asarray(columns[3], dtype=np.int64),
            model=columns[4],
            tokenizer=columns[5],
            punctuation=np.asarray(columns[6], dtype=bool),
            prob=np.asarray([math.nan if v is None else v for v in columns[7]], dtype=np.float64),
            surp=np.asarray([math.nan if v is None else v for v in columns[8]], dtype=np.float64),
        )

    @classmethod
    def concat(cls, tables: list[TokenTable]) -> TokenTable:
        if not tables:
            return cls()
        return cls(
            token=[v for t in tables for v in t.token],
            sentid=[v for t in tables for v in t.sentid],
            word=[v for t in tables for v in t.word],
            wordpos=np.concatenate([t.wordpos for t in tables]),
            model=[v for t in tables for v in t.model],
            tokenizer=[v for t in tables for v in t.tokenizer],
            punctuation=np.concatenate([t.punctuation for t in tables]),
            prob=np.concatenate([t.prob for t in tables]),
            surp=np.concatenate([t.surp for t in tables]),
        )

    def rename_model(self, name: str) -> TokenTable:
        """The same table as the results of the model called `name` (an import under a
        site's model name)."""
        return TokenTable(
            self.token,
            self.sentid,
            self.word,
            self.wordpos,
            [name] * len(self),
            self.tokenizer,
            self.punctuation,
            self.prob,
            self.surp,
        )


def _number(value: float) -> str:
    return "NA" if math.isnan(value) else repr(float(value))


def predictions_to_tsv(
    table: TokenTable, *, word_probability: str | None = None, metric: str | None = None
) -> str:
    """The evaluate table as NLPScholar writes it (tab-separated, no index column).

    `word_probability` adds a last column of that name holding it on every row, so that
    a word-corrected table says so (readers, ours and NLPScholar's, ignore extra columns);
    `metric` likewise a `metric` column, for tokens scored on another string than the
    sentence (lm_eval: the harness's leading space), which `scored_metric` reads back.
    """
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n", quotechar='"')
    extra = tuple(v for v in (word_probability, metric) if v is not None)
    named = (("word_probability",) if word_probability is not None else ()) + (
        ("metric",) if metric is not None else ()
    )
    writer.writerow(COLUMNS + named)
    wordpos = table.wordpos.tolist()
    punct = table.punctuation.tolist()
    prob = table.prob.tolist()
    surp = table.surp.tolist()
    for i in range(len(table)):
        writer.writerow(
            (
                table.token[i],
                table.sentid[i],
                table.word[i],
                wordpos[i],
                table.model[i],
                table.tokenizer[i],
                "True" if punct[i] else "False",
                _number(prob[i]),
                _number(surp[i]),
                *extra,
            )
        )
    return out.getvalue()


def parse_predictions_tsv(data: str | bytes, limits: InputLimits = DEFAULT_LIMITS) -> TokenTable:
    """Read an evaluate table (NLPScholar's own output or Gym's). NLPScholar's `word`,
    `wordpos` and `punctuation` are taken as given. Extra columns (a pandas index) are
    ignored. Rows, lines and fields are held to `limits` as they are read. Raises
    MinimalPairFormatError listing every problem with row and column."""
    feed = LineFeed(decode_text(data), limits)
    reader = csv.reader(feed, delimiter="\t", quotechar='"')
    try:
        return _token_table(reader, feed)
    except LimitExceeded as exc:
        raise MinimalPairFormatError.of(exc) from None


def _token_table(reader: Any, feed: LineFeed) -> TokenTable:
    at, width = _read_header(reader, feed)
    errors: list[PairSetError] = []
    rows: list[tuple] = []
    lines: list[int] = []
    try:
        for fields in reader:
            feed.record(fields)
            if len(fields) != width:
                if not any(cell.strip() for cell in fields):
                    continue
                errors.append(
                    PairSetError(
                        reader.line_num, None, f"{len(fields)} fields where the header has {width}"
                    )
                )
                if len(errors) > 200:
                    break
                continue
            row = _token_row(fields, at, reader.line_num, errors)
            if row is not None:
                rows.append(row)
                lines.append(reader.line_num)
    except csv.Error as exc:
        errors.append(PairSetError(reader.line_num, None, f"cannot read the TSV here: {exc}"))
    if errors:
        raise MinimalPairFormatError(cap_errors(errors))
    table = TokenTable.from_rows(rows)
    table.line = lines
    return table


def scored_metric(data: bytes) -> str | None:
    """The `metric` a predictions file names in its last column (`predictions_to_tsv`),
    read from its first row; None for a file without one."""
    lines = data.decode("utf-8-sig", errors="replace").splitlines()[:2]
    rows = list(csv.reader(lines, delimiter="\t", quotechar='"'))
    if len(rows) < 2 or "metric" not in [c.strip() for c in rows[0]]:
        return None
    at = [c.strip() for c in rows[0]].index("metric")
    return rows[1][at].strip() if at < len(rows[1]) else None


def _read_header(reader: Iterator[list[str]], feed: LineFeed) -> tuple[list[int], int]:
    """(where each of COLUMNS stands, how many columns the header has)."""
    try:
        header = next(reader)
        feed.record(header)
    except StopIteration:
        raise MinimalPairFormatError([PairSetError(None, None, "the file is empty")]) from None
    except csv.Error as exc:
        raise MinimalPairFormatError([PairSetError(1, None, str(exc))]) from None
    header = [name.strip() for name in header]
    missing = [name for name in COLUMNS if name not in header]
    if missing:
        raise MinimalPairFormatError(
            [PairSetError(1, name, f"the predictions need the column `{name}`") for name in missing]
        )
    return [header.index(name) for name in COLUMNS], len(header)


def _token_row(
    fields: list[str], at: list[int], line: int, errors: list[PairSetError]
) -> tuple | None:
    """One row in COLUMNS order, or None with its first problem added to `errors`."""
    i_token, i_sent, i_word, i_pos, i_model, i_tok, i_punct, i_prob, i_surp = at
    try:
        pos = int(fields[i_pos])
    except ValueError:
        errors.append(PairSetError(line, "wordpos", f"{fields[i_pos]!r} is not a whole number"))
        return None
    flag = fields[i_punct].strip().lower()
    if flag not in _TRUE and flag not in _FALSE:
        errors.append(
            PairSetError(line, "punctuation", f"{fields[i_punct]!r} is not True or False")
        )
        return None
    values = []
    for index, name in ((i_prob, "prob"), (i_surp, "surp")):
        cell = fields[index].strip()
        if cell.lower() in _MISSING:
            values.append(math.nan)
            continue
        try:
            values.append(float(cell))
        except ValueError:
            errors.append(PairSetError(line, name, f"{cell!r} is not a number"))
            return None
    return (
        fields[i_token],
        fields[i_sent].strip(),
        fields[i_word],
        pos,
        fields[i_model].strip(),
        fields[i_tok].strip(),
        flag in _TRUE,
        values[0],
        values[1],
    )
