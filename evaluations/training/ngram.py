"""Training a word n-gram model: interpolated modified Kneser-Ney (Chen & Goodman 1999),
written as ARPA for the existing n-gram model kind. No Django, no torch.

Words are what the scorer sees (evaluations.scoring.ngram.segment): whitespace chunks
without their leading and trailing punctuation, lowercased; each line is one sentence,
`<s>` before it and `</s>` after it. Words seen fewer than `min_count` times become
`<unk>`, which is always in the vocabulary.

Counting never holds an n-gram as a Python object. The text is read once into a stream
of int32 word ids on disk (`<s>` starts each sentence); each order is then counted in
chunks of that stream as sorted int64 keys. An n-gram of order k is the pair (id of its
first k-1 words as an order k-1 n-gram, last word), packed as `prefix * V + word`, so the
table of an order is one sorted array, its contexts are contiguous runs, and the id of an
n-gram is its index there.

The estimate, for an n-gram (h, w) of order k with adjusted count a (the raw count at the
highest order and for n-grams that start with `<s>`, else the number of distinct words
seen before it):

    p(w | h) = (a - D_k(a)) / S(h) + gamma(h) * p(w | h[1:])
    gamma(h) = (D_k1 N1(h) + D_k2 N2(h) + D_k3+ N3+(h)) / S(h)

with S(h) the sum of a over h's n-grams, N_r(h) how many of them have a = r, and the
discounts from the counts of counts n_r of order k: Y = n1 / (n1 + 2 n2), D_k1 = 1 - 2Y
n2/n1, D_k2 = 2 - 3Y n3/n2, D_k3+ = 3 - 4Y n4/n3. Below the unigrams lies the uniform
distribution over the vocabulary without `<s>` (which is never predicted). Where a
count of counts is 0 (tiny corpora) the discount is that of the count below (0.5 for D1),
and every discount is clipped to [0.01, r], so that every word keeps some probability.

In the ARPA file an n-gram's probability is the interpolated p(w | h) and a context's
back-off weight is log10 gamma(h): for an unseen (h, w) the back-off rule gives
gamma(h) p(w | h[1:]), which is exactly the interpolated value.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluations.scoring.ngram import SENTENCE_END, SENTENCE_START, UNKNOWN, segment

MIN_ORDER = 2
MAX_ORDER = 6
BOS, EOS, UNK = 0, 1, 2
# Tokens per chunk of the id stream while counting (int64 keys: ~8 bytes each per order).
CHUNK_TOKENS = 4_000_000
# Merge the counted chunks of one order when this many keys are pending.
MERGE_KEYS = 16_000_000
MIN_DISCOUNT = 0.01
ARPA_NAME = "model.arpa"
INFO_NAME = "training.json"


class NgramTrainingError(ValueError):
    """The options or the corpus cannot give a model; the message says why."""


def words_of(line: str) -> list[str]:
    """A line's words as the scorer splits them, without the scorer's final `</s>`.

    A chunk of letters and digits only is its lowercased self (most chunks: the fast
    path); any other goes through the scorer's own `segment`."""
    words: list[str] = []
    for chunk in line.split():
        if chunk.isalnum():
            words.append(chunk.lower())
        else:
            words.extend(w.text for w in segment(chunk, _always) if w.text != SENTENCE_END)
    return words


def _always(_word: str) -> bool:
    return True


@dataclass
class NgramSummary:
    order: int
    min_count: int
    sentences: int = 0
    words: int = 0  # tokens, `</s>` included, `<s>` not
    vocabulary: int = 0  # `<s>`, `</s>` and `<unk>` included
    unknown_types: int = 0  # word types that became <unk>
    ngrams: dict[str, int] = field(default_factory=dict)  # per order, as in the ARPA file
    discounts: dict[str, list[float]] = field(default_factory=dict)  # per order: D1, D2, D3+
    # Each discount not computed from the counts of counts (a count of counts was 0, or
    # the value was clipped), in words: "order 3: D2 ...". Empty when none was.
    discount_notes: list[str] = field(default_factory=list)
    # Held-out perplexity (None without held-out lines): see `heldout_perplexity`.
    heldout: dict[str, Any] | None = None
    seconds: float = 0.0


# --- the id stream ----------------------------------------------------------------------


def _write_stream(
    lines: Iterable[str], path: Path, progress: Callable[[int], None] | None
) -> tuple[np.ndarray, list[str], int]:
    """Words to provisional ids in first-seen order (0-2 are `<s>`, `</s>`, `<unk>`),
    written as int32 to `path`. Returns the count of each provisional id, the words, and
    the number of sentences."""
    ids: dict[str, int] = {SENTENCE_START: BOS, SENTENCE_END: EOS, UNKNOWN: UNK}
    words = [SENTENCE_START, SENTENCE_END, UNKNOWN]
    buffer: list[int] = []
    counts = np.zeros(0, dtype=np.int64)
    sentences = 0
    with path.open("wb") as out:

        def flush() -> None:
            nonlocal counts, buffer
            chunk = np.asarray(buffer, dtype=np.int32)
            chunk.tofile(out)
            found = np.bincount(chunk, minlength=len(words))
            counts = np.concatenate([counts, np.zeros(len(found) - len(counts), np.int64)])
            counts += found
            buffer = []

        for line in lines:
            buffer.append(BOS)
            for word in words_of(line):
                known = ids.get(word)
                if known is None:
                    known = ids[word] = len(words)
                    words.append(word)
                buffer.append(known)
            buffer.append(EOS)
            sentences += 1
            if len(buffer) >= CHUNK_TOKENS:
                flush()
                if progress is not None:
                    progress(sentences)
        flush()
    return counts, words, sentences


def _vocabulary(
    counts: np.ndarray, words: list[str], min_count: int
) -> tuple[np.ndarray, list[str], int]:
    """Final ids: `<s>`, `</s>`, `<unk>`, then the kept words by falling count (ties by
    the word). Returns the provisional-to-final map, the final words and how many word
    types became `<unk>`."""
    provisional = np.arange(3, len(words))
    kept = provisional[counts[3:] >= min_count]
    order = sorted(kept.tolist(), key=lambda i: (-int(counts[i]), words[i]))
    remap = np.full(len(words), UNK, dtype=np.int32)
    remap[:3] = [BOS, EOS, UNK]
    remap[np.asarray(order, dtype=np.int64)] = np.arange(3, 3 + len(order), dtype=np.int32)
    final = [SENTENCE_START, SENTENCE_END, UNKNOWN] + [words[i] for i in order]
    return remap, final, len(provisional) - len(order)


# --- counting ---------------------------------------------------------------------------


@dataclass
class _Order:
    keys: np.ndarray  # sorted int64: prefix id * V + word
    raw: np.ndarray  # raw counts (int64)
    prefix: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    word: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    suffix: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # id at k-1
    adjusted: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    prob: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gamma: np.ndarray = field(default_factory=lambda: np.zeros(0))  # as a context (k+1)


def _merge(keys: list[np.ndarray], counts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    if len(keys) == 1:
        return keys[0], counts[0]
    joined = np.concatenate(keys)
    weights = np.concatenate(counts)
    order = np.argsort(joined, kind="stable")
    joined, weights = joined[order], weights[order]
    starts = np.flatnonzero(np.r_[True, joined[1:] != joined[:-1]])
    return joined[starts], np.add.reduceat(weights, starts)


def _chunks(
    stream: np.ndarray, remap: np.ndarray, overlap: int
) -> Iterator[tuple[np.ndarray, int]]:
    """Final ids of the stream in chunks; each but the first starts `overlap` tokens
    early (returned as how many leading positions end no n-gram of this chunk)."""
    total = len(stream)
    start = 0
    while start < total:
        begin = max(0, start - overlap)
        end = min(total, start + CHUNK_TOKENS)
        yield remap[stream[begin:end]].astype(np.int64), start - begin
        start = end


def _count_order(
    k: int, stream: np.ndarray, remap: np.ndarray, tables: list[_Order], vocab: int
) -> _Order:
    """Raw counts of the order-k n-grams: keys prefix * V + word, prefix being the id of
    the first k-1 words among the order k-1 n-grams (the word itself for k = 2)."""
    pending_keys: list[np.ndarray] = []
    pending_counts: list[np.ndarray] = []
    pending = 0
    for ids, skip in _chunks(stream, remap, k - 1):
        # ctx[j]: id of the (m-1)-gram ending at j-1 ... built up order by order.
        gram = ids.copy()  # order 1: the word id is the unigram id
        valid = np.ones(len(ids), dtype=bool)
        for m in range(2, k + 1):
            key = np.full(len(ids), -1, dtype=np.int64)
            ok = np.zeros(len(ids), dtype=bool)
            # An m-gram ending at j: no <s> after its first word.
            ok[1:] = valid[:-1] & (ids[1:] != BOS)
            key[1:] = gram[:-1] * vocab + ids[1:]
            key[~ok] = -1
            if m == k:
                gram, valid = key, ok
                break
            table = tables[m].keys
            where = np.searchsorted(table, key[ok])
            gram = np.full(len(ids), -1, dtype=np.int64)
            gram[ok] = where
            valid = ok
        valid[:skip] = False
        found, counts = np.unique(gram[valid], return_counts=True)
        pending_keys.append(found)
        pending_counts.append(counts.astype(np.int64))
        pending += len(found)
        if pending >= MERGE_KEYS:
            merged = _merge(pending_keys, pending_counts)
            pending_keys, pending_counts = [merged[0]], [merged[1]]
            pending = len(merged[0])
    if not pending_keys:
        return _Order(keys=np.zeros(0, np.int64), raw=np.zeros(0, np.int64))
    keys, raw = _merge(pending_keys, pending_counts)
    return _Order(keys=keys, raw=raw)


# --- estimating -------------------------------------------------------------------------


def discounts(adjusted: np.ndarray) -> list[float]:
    """D1, D2, D3+ from the counts of counts of `adjusted` (see the module docstring)."""
    return discounts_noted(adjusted)[0]


def discounts_noted(adjusted: np.ndarray) -> tuple[list[float], list[str]]:
    """D1, D2, D3+ and, for each that is not the formula's value, why: a count of counts
    of 0 (tiny corpora: the discount below, or 0.5), or a value clipped to [0.01, r]."""
    n = [int(np.count_nonzero(adjusted == r)) for r in range(5)]
    notes: list[str] = []
    if n[1] + 2 * n[2] > 0:
        y = n[1] / (n[1] + 2 * n[2])
    else:
        y = 0.5
        notes.append("no n-gram was seen once or twice (n1 = n2 = 0): Y = 0.5 instead")
    found: list[float] = []
    for r in (1, 2, 3):
        name = f"D{r}" if r < 3 else "D3+"
        if n[r] > 0:
            value = r - (r + 1) * y * n[r + 1] / n[r]
        else:
            value = found[-1] if found else 0.5
            notes.append(
                f"{name}: no n-gram has an adjusted count of {r} (n{r} = 0), so {name} = "
                f"{'D' + str(r - 1) if found else '0.5'} ({value:.4g})"
            )
        clipped = min(max(value, MIN_DISCOUNT), float(r))
        if clipped != value:
            notes.append(
                f"{name}: {value:.4g} clipped to {clipped:.4g} (within [{MIN_DISCOUNT}, {r}])"
            )
        found.append(clipped)
    return found, notes


def _discounted(adjusted: np.ndarray, d: list[float]) -> np.ndarray:
    table = np.array([0.0, d[0], d[1], d[2]])
    return table[np.minimum(adjusted, 3)]


def _estimate(tables: list[_Order], vocab: int, summary: NgramSummary) -> None:
    order = len(tables) - 1
    # Structure: prefix, word and suffix ids of every n-gram.
    for k in range(1, order + 1):
        t = tables[k]
        t.prefix = t.keys // vocab
        t.word = t.keys % vocab
        if k == 1:
            t.suffix = np.zeros(len(t.keys), np.int64)
        else:
            below = tables[k - 1]
            wanted = tables[k - 1].suffix[t.prefix] if k > 2 else np.zeros(len(t.keys), np.int64)
            wanted = wanted * vocab + t.word
            t.suffix = np.searchsorted(below.keys, wanted)
    # Adjusted counts: raw at the top and for n-grams starting with <s>; else the number
    # of distinct words before (order k+1 n-grams with this suffix).
    for k in range(1, order + 1):
        t = tables[k]
        if k == order:
            t.adjusted = t.raw.copy()
            continue
        left = np.bincount(tables[k + 1].suffix, minlength=len(t.keys)).astype(np.int64)
        starts_bos = _first_word(tables, k) == BOS
        t.adjusted = np.where(starts_bos, t.raw, left)
    # Unigrams: <s> is never predicted.
    uni = tables[1]
    uni.adjusted[BOS] = 0
    lower = np.full(vocab, 1.0 / (vocab - 1))
    lower[BOS] = 0.0
    for k in range(1, order + 1):
        t = tables[k]
        counted = t.adjusted if k > 1 else np.delete(t.adjusted, BOS)
        d, notes = discounts_noted(counted)
        summary.discounts[str(k)] = [round(x, 6) for x in d]
        summary.discount_notes.extend(f"order {k}: {note}" for note in notes)
        contexts = len(tables[k - 1].keys) if k > 1 else 1
        prefix = t.prefix if k > 1 else np.zeros(len(t.keys), np.int64)
        total = np.bincount(prefix, weights=t.adjusted, minlength=contexts)
        taken = _discounted(t.adjusted, d)
        mass = np.bincount(prefix, weights=taken, minlength=contexts)
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = np.where(total > 0, mass / total, 0.0)
            own = np.where(total[prefix] > 0, (t.adjusted - taken) / total[prefix], 0.0)
        below = lower[t.word] if k == 1 else tables[k - 1].prob[t.suffix]
        t.prob = own + gamma[prefix] * below
        if k == 1:
            t.prob[BOS] = 0.0
        else:  # a context's back-off weight; NaN: never a context (no weight written)
            tables[k - 1].gamma = np.where(total > 0, gamma, np.nan)


def _first_word(tables: list[_Order], k: int) -> np.ndarray:
    """The first word of every order-k n-gram."""
    ids = np.arange(len(tables[k].keys))
    for m in range(k, 1, -1):
        ids = tables[m].prefix[ids]
    return tables[1].word[ids]


# --- held-out perplexity ------------------------------------------------------------------


def heldout_perplexity(
    tables: list[_Order], words: list[str], lines: Iterable[str]
) -> dict[str, Any] | None:
    """The perplexity of held-out `lines` under the model, as the scorer reads it: each
    line `<s>` words `</s>`, every word and `</s>` predicted (`<s>` never), a word out of
    the vocabulary scored as `<unk>` (counted in `oov`), log10 probabilities summed and
    PPL = 10 ** (-sum / predicted). `by_order[k]`: the same with the model cut to its
    orders 1 to k, by the ARPA back-off rule from the longest n-gram of order at most k
    (the lower orders are this model's, whose counts are continuation counts: not a
    separately trained k-gram). None without held-out lines."""
    vocab = len(words)
    ids_of = {word: i for i, word in enumerate(words)}
    stream: list[int] = []
    oov = 0
    for line in lines:
        stream.append(BOS)
        for word in words_of(line):
            known = ids_of.get(word, UNK)
            oov += known == UNK and word != UNKNOWN
            stream.append(known)
        stream.append(EOS)
    ids = np.asarray(stream, dtype=np.int64)
    predicted = ids != BOS
    if not predicted.any():
        return None
    order = len(tables) - 1
    logs = _backoff_logs(tables, ids, vocab)
    by_order = {
        str(k): round(float(10 ** (-logs[k][predicted].sum() / predicted.sum())), 4)
        for k in range(1, order + 1)
    }
    return {
        "sentences": int(np.count_nonzero(ids == BOS)),
        "words": int(predicted.sum()),
        "oov": int(oov),
        "perplexity": by_order[str(order)],
        "by_order": by_order,
    }


def _backoff_logs(tables: list[_Order], ids: np.ndarray, vocab: int) -> list[np.ndarray]:
    """log10 p_k(w_j | history) at every position j, for k = 1 .. order ([0] unused): the
    order-k n-gram ending at j if the model has it, else the back-off weight of the
    (k-1)-gram ending at j-1 (1 where it is no context) times p_{k-1}."""
    order = len(tables) - 1
    found_ids = ids.copy()  # order 1: every word is a unigram
    found = np.ones(len(ids), dtype=bool)
    probs = tables[1].prob[ids]
    logs: list[np.ndarray] = [np.zeros(0), _log10(probs)]
    for k in range(2, order + 1):
        before = tables[k - 1]
        ctx_ok = np.zeros(len(ids), dtype=bool)
        ctx_ok[1:] = found[:-1] & (ids[1:] != BOS)
        ctx = np.zeros(len(ids), dtype=np.int64)
        ctx[1:] = found_ids[:-1]
        weight = np.ones(len(ids))
        if len(before.gamma):
            gamma = before.gamma[ctx[ctx_ok]]
            weight[ctx_ok] = np.where(np.isnan(gamma), 1.0, gamma)
        key = ctx * vocab + ids
        table = tables[k].keys
        where = np.minimum(np.searchsorted(table, key), max(len(table) - 1, 0))
        has = ctx_ok & (len(table) > 0)
        has[has] = table[where[has]] == key[has]
        probs = np.where(has, tables[k].prob[where] if len(table) else 0.0, weight * probs)
        logs.append(_log10(probs))
        found, found_ids = has, where
    return logs


# --- writing ----------------------------------------------------------------------------


def _columns(tables: list[_Order], k: int, rows: np.ndarray) -> list[np.ndarray]:
    """The words (as ids) of order-k n-grams `rows`, first to last."""
    out: list[np.ndarray] = []
    ids = rows
    for m in range(k, 0, -1):
        out.append(tables[m].word[ids])
        if m > 1:
            ids = tables[m].prefix[ids]
    return out[::-1]


def _log10(values: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        logs = np.log10(values)
    return np.where(np.isfinite(logs), logs, -99.0)


def _write_arpa(tables: list[_Order], words: list[str], path: Path) -> dict[str, int]:
    order = len(tables) - 1
    counts = {str(k): len(tables[k].keys) for k in range(1, order + 1)}
    with path.open("w", encoding="utf-8", newline="\n") as out:
        out.write("\\data\\\n")
        for k in range(1, order + 1):
            out.write(f"ngram {k}={counts[str(k)]}\n")
        vocab = np.asarray(words, dtype=object)
        for k in range(1, order + 1):
            t = tables[k]
            out.write(f"\n\\{k}-grams:\n")
            step = 500_000
            for start in range(0, len(t.keys), step):
                rows = np.arange(start, min(start + step, len(t.keys)))
                text = [
                    " ".join(c)
                    for c in zip(*(vocab[col] for col in _columns(tables, k, rows)), strict=True)
                ]
                probs = _log10(t.prob[rows])
                if k < order:
                    backs = t.gamma[rows]
                    has = ~np.isnan(backs)
                    back_text = np.where(has, _log10(np.where(has, backs, 1.0)), 0.0)
                    lines = [
                        f"{p:.7f}\t{w}\t{b:.7f}\n" if h else f"{p:.7f}\t{w}\n"
                        for p, w, b, h in zip(
                            probs.tolist(), text, back_text.tolist(), has.tolist(), strict=True
                        )
                    ]
                else:
                    lines = [f"{p:.7f}\t{w}\n" for p, w in zip(probs.tolist(), text, strict=True)]
                out.writelines(lines)
        out.write("\n\\end\\\n")
    return counts


# --- the whole ----------------------------------------------------------------------------


def train_ngram(
    lines: Iterable[str],
    out_dir: Path,
    *,
    order: int = 3,
    min_count: int = 1,
    progress: Callable[[str, int], None] | None = None,
    work_dir: Path | None = None,
    heldout: Iterable[str] = (),
) -> NgramSummary:
    """Train on `lines` (one sentence each) and write `out_dir/model.arpa` and
    `out_dir/training.json` (the summary, with the perplexity of the `heldout` lines).
    `progress(stage, amount)` hears of the sentences read and of each order counted."""
    if not MIN_ORDER <= order <= MAX_ORDER:
        raise NgramTrainingError(f"the order must be from {MIN_ORDER} to {MAX_ORDER}; got {order}")
    if min_count < 1:
        raise NgramTrainingError(f"the vocabulary cutoff must be 1 or more; got {min_count}")
    started = time.perf_counter()
    summary = NgramSummary(order=order, min_count=min_count)
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".ngram-", dir=work_dir or out_dir))
    try:
        stream_path = scratch / "ids.int32"
        counts, provisional, sentences = _write_stream(
            lines, stream_path, (lambda n: progress("sentences", n)) if progress else None
        )
        if sentences == 0:
            raise NgramTrainingError("the corpus has no sentences")
        remap, words, unknown = _vocabulary(counts, provisional, min_count)
        vocab = len(words)
        stream = np.memmap(stream_path, dtype=np.int32, mode="r")
        summary.sentences = sentences
        summary.words = int(len(stream) - sentences)
        summary.vocabulary = vocab
        summary.unknown_types = unknown
        tables: list[_Order] = [_Order(keys=np.zeros(1, np.int64), raw=np.zeros(1, np.int64))]
        # Every word of the vocabulary is a unigram (<unk> even when unseen).
        raw = np.bincount(remap, weights=counts, minlength=vocab).astype(np.int64)
        tables.append(_Order(keys=np.arange(vocab, dtype=np.int64), raw=raw))
        for k in range(2, order + 1):
            tables.append(_count_order(k, stream, remap, tables, vocab))
            if progress is not None:
                progress("order", k)
        del stream
        _estimate(tables, vocab, summary)
        summary.heldout = heldout_perplexity(tables, words, heldout)
        summary.ngrams = _write_arpa(tables, words, scratch / ARPA_NAME)
        summary.seconds = round(time.perf_counter() - started, 3)
        os.replace(scratch / ARPA_NAME, out_dir / ARPA_NAME)
        (out_dir / INFO_NAME).write_text(
            json.dumps({"kind": "ngram", **asdict(summary)}, indent=2) + "\n", encoding="utf-8"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return summary
