"""The evaluate table of a minimal-pair run: one row per token, NLPScholar's columns.

`token, sentid, word, wordpos, model, tokenizer, punctuation, prob, surp` (surp in bits,
prob = 2**-surp). Columnar (lists and numpy arrays) so that the analysis of a
BLiMP-sized table stays vectorised. Pure Python + numpy, no Django.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from suites.formats.minimal_pairs import MinimalPairFormatError, PairSetError, cap_errors

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


def predictions_to_tsv(table: TokenTable) -> str:
    """The evaluate table as NLPScholar writes it (tab-separated, no index column)."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n", quotechar='"')
    writer.writerow(COLUMNS)
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
            )
        )
    return out.getvalue()


def parse_predictions_tsv(data: str | bytes) -> TokenTable:
    """Read an evaluate table (NLPScholar's own output or Gym's). NLPScholar's `word`,
    `wordpos` and `punctuation` are taken as given. Extra columns (a pandas index) are
    ignored. Raises MinimalPairFormatError listing every problem with row and column."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MinimalPairFormatError(
                [PairSetError(None, None, f"the file is not UTF-8 text (byte {exc.start})")]
            ) from None
    text = data.removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quotechar='"')
    try:
        header = next(reader)
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
    at = [header.index(name) for name in COLUMNS]
    width = len(header)
    errors: list[PairSetError] = []
    token: list[str] = []
    sentid: list[str] = []
    word: list[str] = []
    wordpos: list[int] = []
    model: list[str] = []
    tokenizer: list[str] = []
    punct: list[bool] = []
    prob: list[float] = []
    surp: list[float] = []
    i_token, i_sent, i_word, i_pos, i_model, i_tok, i_punct, i_prob, i_surp = at
    try:
        for fields in reader:
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
            line = reader.line_num
            try:
                pos = int(fields[i_pos])
            except ValueError:
                errors.append(
                    PairSetError(line, "wordpos", f"{fields[i_pos]!r} is not a whole number")
                )
                continue
            flag = fields[i_punct].strip().lower()
            if flag in _TRUE:
                is_punct = True
            elif flag in _FALSE:
                is_punct = False
            else:
                errors.append(
                    PairSetError(line, "punctuation", f"{fields[i_punct]!r} is not True or False")
                )
                continue
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
                    break
            if len(values) < 2:
                continue
            token.append(fields[i_token])
            sentid.append(fields[i_sent].strip())
            word.append(fields[i_word])
            wordpos.append(pos)
            model.append(fields[i_model].strip())
            tokenizer.append(fields[i_tok].strip())
            punct.append(is_punct)
            prob.append(values[0])
            surp.append(values[1])
    except csv.Error as exc:
        errors.append(PairSetError(reader.line_num, None, f"cannot read the TSV here: {exc}"))
    if errors:
        raise MinimalPairFormatError(cap_errors(errors))
    return TokenTable(
        token=token,
        sentid=sentid,
        word=word,
        wordpos=np.asarray(wordpos, dtype=np.int64),
        model=model,
        tokenizer=tokenizer,
        punctuation=np.asarray(punct, dtype=bool),
        prob=np.asarray(prob, dtype=np.float64),
        surp=np.asarray(surp, dtype=np.float64),
    )
