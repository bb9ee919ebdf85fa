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

Out of core (when the tables would not fit the memory budget, or when asked), the
counted chunks are written as sorted runs on disk, merged in streaming passes into each
order's table kept as a file, and the estimate below is computed a block of rows at a
time over those files (`_Store`). Every step is exact whatever the block (integer sums,
then per-row arithmetic), so both paths write the same ARPA file.

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
import mmap
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluations.scoring.ngram import SENTENCE_END, SENTENCE_START, UNKNOWN, segment
from gym import processes

MIN_ORDER = 2
MAX_ORDER = 6
BOS, EOS, UNK = 0, 1, 2
# Tokens per chunk of the id stream while counting (int64 keys: ~8 bytes each per order).
CHUNK_TOKENS = 4_000_000
# Merge the counted chunks of one order when this many keys are pending.
MERGE_KEYS = 16_000_000
# Out of core: the most sorted runs merged in one pass; more are merged in groups first.
MAX_FAN_IN = 16
MIN_DISCOUNT = 0.01
# Out of core: bytes of working memory per pending n-gram while counting (key, count and
# the merge's scratch), per token of a counting chunk (the pending n-grams and the chunk
# share the budget half and half), per row of an estimating block, and per line of the
# ARPA file while it is written (its text). Reading the corpus holds a chunk of tokens
# as Python ints (`BYTES_PER_READ`) on either path.
BYTES_PER_PENDING = 192
BYTES_PER_TOKEN = 320
BYTES_PER_ROW = 256
BYTES_PER_LINE = 640
BYTES_PER_READ = 64
SCRATCH_PREFIX = ".ngram-"
# Out of core: the scratch files' pages mapped into the process (RssFile) are dropped
# (madvise MADV_DONTNEED; they stay in the page cache, dirty ones included) whenever they
# pass this share of the budget, so that max RSS too stays near the budget.
MAPPED_SHARE = 0.5
# A pass that would leave less than this free on the scratch folder's disk stops the run.
DISK_RESERVE_BYTES = 256 * 1024 * 1024
ARPA_NAME = "model.arpa"
INFO_NAME = "training.json"


class NgramTrainingError(ValueError):
    """The options or the corpus cannot give a model; the message says why."""


class NgramTrainingStopped(Exception):
    """`should_stop` answered yes: the run was cancelled (its scratch folder is gone)."""


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
    # "in memory" or "out of core" (sorted runs on disk, merged in streaming passes).
    counting: str = "in memory"
    memory_mb: int = 0  # the budget the path was chosen by (and out of core kept to)
    runs: int = 0  # sorted runs written to disk, all orders together
    temp_disk_peak_bytes: int = 0  # the scratch folder's largest size, id stream included
    disk_mb: int | None = None  # the bound on the scratch folder's size (None: free space)


def default_memory_mb() -> int:
    """A quarter of the machine's memory, in MB (MemTotal of /proc/meminfo, else
    sysconf; 1024 when neither answers)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return max(1, int(line.split()[1]) // 1024 // 4)
    except (OSError, ValueError, IndexError):
        pass
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return max(1, total // (1024 * 1024) // 4)
    except (OSError, ValueError, AttributeError):
        return 1024


class NgramDiskFull(NgramTrainingError):
    """The scratch folder would pass its bound (`disk_mb`) or fill its disk."""


class _Disk:
    """The scratch folder's size, its peak and its bound: `limit` bytes (None: none),
    and never less than DISK_RESERVE_BYTES left free on the disk."""

    def __init__(self, folder: Path, limit: int | None) -> None:
        self.folder = folder
        self.limit = limit
        self.used = 0
        self.peak = 0

    def grow(self, size: int, what: str) -> None:
        """Count `size` more bytes about to be written for `what`; NgramDiskFull (the
        run stops, its scratch removed) if that passes the bound or the free space."""
        if self.limit is not None and self.used + size > self.limit:
            raise NgramDiskFull(
                f"temporary disk: {what} would take the scratch folder {self.folder} to "
                f"{_mb(self.used + size)} MB, over the bound of {_mb(self.limit)} MB "
                "(disk_mb); raise the bound, or give a smaller corpus or order"
            )
        free = shutil.disk_usage(self.folder).free
        if size > free - DISK_RESERVE_BYTES:
            raise NgramDiskFull(
                f"temporary disk: {what} needs {_mb(size)} MB in {self.folder}, which has "
                f"{_mb(free)} MB free (the run keeps {_mb(DISK_RESERVE_BYTES)} MB free); "
                "free some space or put the scratch folder on a larger disk"
            )
        self.used += size
        self.peak = max(self.peak, self.used)

    def shrink(self, size: int) -> None:
        self.used -= size


def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f}"


def _mapped_bytes() -> int:
    """The file pages mapped into this process now (RssFile + RssShmem, /proc/self/statm)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[2]) * mmap.PAGESIZE
    except (OSError, ValueError, IndexError):
        return 0


class _Store:
    """Where the big arrays live: in memory (`folder` None) or as files in the scratch
    folder, mapped. Tracks the bytes on disk and their peak (`disk`); `budget` is the
    working memory in bytes out of core, and `bound()` keeps the mapped pages of the
    scratch files within MAPPED_SHARE of it."""

    def __init__(self, folder: Path | None, budget: int, disk: _Disk | None = None) -> None:
        self.folder = folder
        self.budget = budget
        self.space = disk
        self.runs = 0
        self.names = 0
        self.maps: list[weakref.ref[np.memmap]] = []
        # Over the file pages mapped before (libraries: a worker's torch is hundreds of MB).
        share = max(8 * 1024 * 1024, int(budget * MAPPED_SHARE))
        self.mapped_limit = (_mapped_bytes() + share) if folder else 0
        self.drops = 0
        half = budget // 2
        self.pending_entries = max(2, half // BYTES_PER_PENDING) if folder else MERGE_KEYS
        self.chunk_tokens = max(16, half // BYTES_PER_TOKEN) if folder else CHUNK_TOKENS
        self.block = max(16, budget // BYTES_PER_ROW) if folder else 1 << 62
        self.lines = max(16, min(500_000, budget // BYTES_PER_LINE)) if folder else 500_000

    @property
    def peak(self) -> int:
        return self.space.peak if self.space else 0

    def grew(self, size: int, what: str = "an array") -> None:
        if self.space is not None:
            self.space.grow(size, what)

    def shrank(self, size: int) -> None:
        if self.space is not None:
            self.space.shrink(size)

    def map(self, path: Path, dtype: Any, mode: str = "r", n: int | None = None) -> np.memmap:
        """A scratch file mapped, its pages then kept in bounds by `bound()`."""
        shape = None if n is None else (n,)
        out = np.memmap(path, dtype=dtype, mode=mode, shape=shape)  # type: ignore[call-overload]
        self.maps.append(weakref.ref(out))
        return out

    def bound(self) -> None:
        """Out of core: when the scratch files' pages mapped into the process pass the
        limit, drop them from the process (MADV_DONTNEED: the data stays in the page
        cache and on disk; the next touch maps it again). In memory: nothing."""
        if self.folder is None or _mapped_bytes() <= self.mapped_limit:
            return
        live: list[weakref.ref[np.memmap]] = []
        for ref in self.maps:
            array = ref()
            if array is None:
                continue
            live.append(ref)
            handle = getattr(array, "_mmap", None)
            if handle is not None and not handle.closed:
                handle.madvise(mmap.MADV_DONTNEED)
        self.maps = live
        self.drops += 1

    def path(self, stem: str) -> Path:
        assert self.folder is not None
        self.names += 1
        return self.folder / f"{stem}-{self.names}.bin"

    def empty(self, n: int, dtype: Any, fill: float | None = None) -> np.ndarray:
        if self.folder is None or n == 0:
            out = np.empty(n, dtype=dtype)
        else:
            path = self.path("array")
            self.grew(n * np.dtype(dtype).itemsize, f"an array of {n:,} rows")
            out = self.map(path, dtype, "w+", n)
        if fill is not None:
            out[:] = fill
        return out

    def free(self, array: np.ndarray) -> np.ndarray:
        """Drop an array no longer needed: its file is removed (its disk is free once
        the last reference goes). Returns an empty array to put in its place."""
        if isinstance(array, np.memmap) and array.filename is not None:
            path = Path(array.filename)
            if path.parent == self.folder and path.exists():
                path.unlink()
                self.shrank(array.nbytes)
        return np.zeros(0, array.dtype)

    def blocks(self, n: int) -> Iterator[tuple[int, int]]:
        step = min(self.block, max(n, 1))
        for start in range(0, n, step):
            yield start, min(n, start + step)
            self.bound()


# --- the id stream ----------------------------------------------------------------------


def _write_stream(
    lines: Iterable[str],
    path: Path,
    progress: Callable[[int], None] | None,
    chunk_tokens: int = CHUNK_TOKENS,
    disk: _Disk | None = None,
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
            if disk is not None:
                disk.grow(chunk.nbytes, "the corpus as word ids")
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
            if len(buffer) >= chunk_tokens:
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
    stream: np.ndarray, remap: np.ndarray, overlap: int, size: int = CHUNK_TOKENS
) -> Iterator[tuple[np.ndarray, int]]:
    """Final ids of the stream in chunks of `size`; each but the first starts `overlap`
    tokens early (returned as how many leading positions end no n-gram of this chunk)."""
    total = len(stream)
    start = 0
    while start < total:
        begin = max(0, start - overlap)
        end = min(total, start + size)
        yield remap[stream[begin:end]].astype(np.int64), start - begin
        start = end


def _count_order(
    k: int,
    stream: np.ndarray,
    remap: np.ndarray,
    tables: list[_Order],
    vocab: int,
    store: _Store | None = None,
) -> _Order:
    """Raw counts of the order-k n-grams: keys prefix * V + word, prefix being the id of
    the first k-1 words among the order k-1 n-grams (the word itself for k = 2).

    In memory the counted chunks are merged as they come. Out of core (a `store` with a
    folder) the pending keys are merged and written as a sorted run whenever they pass
    the budget, and the runs are merged in a streaming pass (`_merge_runs`)."""
    store = store or _Store(None, 0)
    pending_keys: list[np.ndarray] = []
    pending_counts: list[np.ndarray] = []
    pending = 0
    runs: list[tuple[Path, Path, int]] = []
    for ids, skip in _chunks(stream, remap, k - 1, store.chunk_tokens):
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
        store.bound()
        found, counts = np.unique(gram[valid], return_counts=True)
        pending_keys.append(found)
        pending_counts.append(counts.astype(np.int64))
        pending += len(found)
        if pending >= store.pending_entries:
            merged = _merge(pending_keys, pending_counts)
            if store.folder is not None:
                runs.append(_write_run(store, *merged))
                pending_keys, pending_counts, pending = [], [], 0
            else:
                pending_keys, pending_counts = [merged[0]], [merged[1]]
                pending = len(merged[0])
    if runs:
        if pending_keys:
            runs.append(_write_run(store, *_merge(pending_keys, pending_counts)))
        return _merge_runs(store, runs)
    if not pending_keys:
        return _Order(keys=np.zeros(0, np.int64), raw=np.zeros(0, np.int64))
    keys, raw = _merge(pending_keys, pending_counts)
    if store.folder is not None:  # kept on disk like the merged runs
        on_disk = _Order(keys=store.empty(len(keys), np.int64), raw=store.empty(len(raw), np.int64))
        on_disk.keys[:] = keys
        on_disk.raw[:] = raw
        return on_disk
    return _Order(keys=keys, raw=raw)


def _write_run(store: _Store, keys: np.ndarray, counts: np.ndarray) -> tuple[Path, Path, int]:
    """One sorted run (unique keys and their counts) as two raw int64 files."""
    key_path, count_path = store.path("run-keys"), store.path("run-counts")
    store.grew(2 * 8 * len(keys), f"a sorted run of {len(keys):,} n-grams")
    keys.astype(np.int64).tofile(key_path)
    counts.astype(np.int64).tofile(count_path)
    store.runs += 1
    return key_path, count_path, len(keys)


def _merge_runs(store: _Store, runs: list[tuple[Path, Path, int]]) -> _Order:
    """The sorted runs merged into the order's table on disk: in groups of at most
    MAX_FAN_IN runs per pass (each group a longer run) until one pass merges them all."""
    while len(runs) > MAX_FAN_IN:
        runs = [
            _merge_pass(store, runs[start : start + MAX_FAN_IN])
            for start in range(0, len(runs), MAX_FAN_IN)
        ]
    key_path, raw_path, total = _merge_pass(store, runs)
    if total == 0:
        return _Order(keys=np.zeros(0, np.int64), raw=np.zeros(0, np.int64))
    return _Order(keys=store.map(key_path, np.int64), raw=store.map(raw_path, np.int64))


def _merge_pass(store: _Store, runs: list[tuple[Path, Path, int]]) -> tuple[Path, Path, int]:
    """One streaming pass: `runs` merged into one, which is returned; they are removed.

    A k-way merge as heapq.merge does it, a block at a time: take the next block of
    every run, the smallest of their last keys bounds what is complete, every entry up
    to it is summed by key and appended, and the rest waits for the next round. At most
    the budget's worth of entries is in memory at once."""
    maps = [(store.map(kp, np.int64), store.map(cp, np.int64)) for kp, cp, n in runs if n]
    step = max(1, store.pending_entries // max(1, len(maps)) // 2)
    at = [0] * len(maps)
    key_path, raw_path = store.path("run-keys"), store.path("run-counts")
    total = 0
    with key_path.open("wb") as key_out, raw_path.open("wb") as raw_out:
        while True:
            live = [i for i, (keys, _c) in enumerate(maps) if at[i] < len(keys)]
            if not live:
                break
            bound = min(int(maps[i][0][min(at[i] + step, len(maps[i][0])) - 1]) for i in live)
            parts_k: list[np.ndarray] = []
            parts_c: list[np.ndarray] = []
            for i in live:
                keys, counts = maps[i]
                block = np.asarray(keys[at[i] : min(at[i] + step, len(keys))])
                upto = at[i] + int(np.searchsorted(block, bound, side="right"))
                parts_k.append(np.asarray(keys[at[i] : upto]))
                parts_c.append(np.asarray(counts[at[i] : upto]))
                at[i] = upto
            merged_k, merged_c = _merge(parts_k, parts_c)
            store.grew(2 * 8 * len(merged_k), f"merging {len(runs)} sorted runs")
            merged_k.tofile(key_out)
            merged_c.tofile(raw_out)
            total += len(merged_k)
            store.bound()
    del maps
    for kp, cp, n in runs:
        kp.unlink()
        cp.unlink()
        store.shrank(2 * 8 * n)
    return key_path, raw_path, total


# --- estimating -------------------------------------------------------------------------


def discounts(adjusted: np.ndarray) -> list[float]:
    """D1, D2, D3+ from the counts of counts of `adjusted` (see the module docstring)."""
    return discounts_noted(adjusted)[0]


def discounts_noted(adjusted: np.ndarray) -> tuple[list[float], list[str]]:
    """D1, D2, D3+ and, for each that is not the formula's value, why: a count of counts
    of 0 (tiny corpora: the discount below, or 0.5), or a value clipped to [0.01, r]."""
    return _discounts_of([int(np.count_nonzero(adjusted == r)) for r in range(5)])


def _discounts_of(n: list[int]) -> tuple[list[float], list[str]]:
    """`discounts_noted` from the counts of counts n0 .. n4."""
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


def _estimate(
    tables: list[_Order], vocab: int, summary: NgramSummary, store: _Store | None = None
) -> None:
    """Adjusted counts, discounts, probabilities and back-off weights of every order, a
    block of rows at a time (the whole table in memory, a budget's worth out of core).
    Every step is exact in blocks: integer sums, and per-row arithmetic."""
    store = store or _Store(None, 0)
    order = len(tables) - 1
    _structure(tables, vocab, store)
    _adjusted_counts(tables, store)
    for k in range(1, order + 1):
        tables[k].raw = store.free(tables[k].raw)
    # Unigrams: <s> is never predicted.
    tables[1].adjusted[BOS] = 0
    lower = np.full(vocab, 1.0 / (vocab - 1))
    lower[BOS] = 0.0
    for k in range(1, order + 1):
        _probabilities(tables, k, lower, summary, store)


def _structure(tables: list[_Order], vocab: int, store: _Store) -> None:
    """The prefix, word and suffix ids of every n-gram of every order."""
    for k in range(1, len(tables)):
        t = tables[k]
        n = len(t.keys)
        t.prefix, t.word = store.empty(n, np.int64), store.empty(n, np.int64)
        t.suffix = store.empty(n, np.int64)
        for a, b in store.blocks(n):
            keys = np.asarray(t.keys[a:b])
            prefix, word = keys // vocab, keys % vocab
            t.prefix[a:b], t.word[a:b] = prefix, word
            if k == 1:
                t.suffix[a:b] = 0
                continue
            below = tables[k - 1]
            wanted = np.asarray(below.suffix[prefix]) if k > 2 else np.zeros(b - a, np.int64)
            t.suffix[a:b] = np.searchsorted(below.keys, wanted * vocab + word)


def _adjusted_counts(tables: list[_Order], store: _Store) -> None:
    """Adjusted counts: raw at the top order and for n-grams starting with <s>; else the
    number of distinct words before (order k+1 n-grams with this suffix)."""
    order = len(tables) - 1
    for k in range(1, order + 1):
        t = tables[k]
        n = len(t.keys)
        t.adjusted = store.empty(n, np.int64)
        if k == order:
            for a, b in store.blocks(n):
                t.adjusted[a:b] = t.raw[a:b]
            continue
        left = store.empty(n, np.int64, fill=0)
        above = tables[k + 1]
        for a, b in store.blocks(len(above.keys)):
            found, times = np.unique(np.asarray(above.suffix[a:b]), return_counts=True)
            left[found] += times
        for a, b in store.blocks(n):
            starts_bos = _first_word(tables, k, np.arange(a, b)) == BOS
            t.adjusted[a:b] = np.where(starts_bos, t.raw[a:b], left[a:b])
        store.free(left)
        del left


def _probabilities(
    tables: list[_Order], k: int, lower: np.ndarray, summary: NgramSummary, store: _Store
) -> None:
    """Order k's discounts (into `summary`), interpolated probabilities, and the back-off
    weights of its contexts (kept on order k-1); frees what order k no longer needs.
    `lower` is the uniform distribution the unigrams back off to."""
    t = tables[k]
    n = len(t.keys)
    d = _order_discounts(t, k, summary, store)
    contexts = len(tables[k - 1].keys) if k > 1 else 1
    total, ones, twos, more = _context_sums(t, k, contexts, store)
    gamma = store.empty(contexts, np.float64)
    for a, b in store.blocks(contexts):
        mass = d[0] * ones[a:b] + d[1] * twos[a:b] + d[2] * more[a:b]
        sums = np.asarray(total[a:b])
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma[a:b] = np.where(sums > 0, mass / sums, 0.0)
    t.prob = store.empty(n, np.float64)
    for a, b in store.blocks(n):
        prefix = np.asarray(t.prefix[a:b]) if k > 1 else np.zeros(b - a, np.int64)
        adjusted = np.asarray(t.adjusted[a:b])
        taken = _discounted(adjusted, d)
        sums = np.asarray(total[prefix]).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            own = np.where(sums > 0, (adjusted - taken) / sums, 0.0)
        word = np.asarray(t.word[a:b])
        backed = lower[word] if k == 1 else np.asarray(tables[k - 1].prob[t.suffix[a:b]])
        t.prob[a:b] = own + np.asarray(gamma[prefix]) * backed
    if k == 1:
        t.prob[BOS] = 0.0
        store.free(gamma)
    else:  # a context's back-off weight; NaN: never a context (no weight written)
        for a, b in store.blocks(contexts):
            gamma[a:b] = np.where(total[a:b] > 0, gamma[a:b], np.nan)
        tables[k - 1].gamma = gamma
    for done in (total, ones, twos, more):
        store.free(done)
    t.adjusted, t.suffix = store.free(t.adjusted), store.free(t.suffix)
    del total, ones, twos, more, gamma


def _order_discounts(t: _Order, k: int, summary: NgramSummary, store: _Store) -> list[float]:
    """Order k's three discounts from its counts of counts (adjusted counts 1 to 4), and
    what was done where they could not be estimated, recorded in `summary`."""
    of_counts = [0] * 5
    for a, b in store.blocks(len(t.keys)):
        found = np.bincount(np.minimum(np.asarray(t.adjusted[a:b]), 5), minlength=6)
        of_counts = [x + int(y) for x, y in zip(of_counts, found[:5], strict=True)]
    d, notes = _discounts_of(of_counts)
    summary.discounts[str(k)] = [round(x, 6) for x in d]
    summary.discount_notes.extend(f"order {k}: {note}" for note in notes)
    return d


def _context_sums(t: _Order, k: int, contexts: int, store: _Store) -> tuple[Any, Any, Any, Any]:
    """Per context (contiguous: the table is sorted by prefix): the sum of adjusted counts
    and how many n-grams have 1, 2, 3 or more."""
    total = store.empty(contexts, np.int64, fill=0)
    ones, twos, more = (store.empty(contexts, np.int64, fill=0) for _ in range(3))
    for a, b in store.blocks(len(t.keys)):
        prefix = np.asarray(t.prefix[a:b]) if k > 1 else np.zeros(b - a, np.int64)
        adjusted = np.asarray(t.adjusted[a:b])
        at, first = np.unique(prefix, return_index=True)
        total[at] += np.add.reduceat(adjusted, first)
        for column, hit in (
            (ones, adjusted == 1),
            (twos, adjusted == 2),
            (more, adjusted >= 3),
        ):
            column[at] += np.add.reduceat(hit.astype(np.int64), first)
    return total, ones, twos, more


def _first_word(tables: list[_Order], k: int, rows: np.ndarray | None = None) -> np.ndarray:
    """The first word of the order-k n-grams `rows` (all of them by default)."""
    ids = np.arange(len(tables[k].keys)) if rows is None else rows
    for m in range(k, 1, -1):
        ids = np.asarray(tables[m].prefix[ids])
    return np.asarray(tables[1].word[ids])


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


def _write_arpa(
    tables: list[_Order],
    words: list[str],
    path: Path,
    step: int = 500_000,
    store: _Store | None = None,
) -> dict[str, int]:
    """The ARPA file, written in a stream of `step` rows at a time (each counted on the
    `store`'s disk before it is written, its mapped pages kept in bounds)."""
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
                if store is not None:
                    store.grew(sum(map(len, lines)), "the ARPA file")
                    store.bound()
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
    memory_mb: int | None = None,
    out_of_core: bool | None = None,
    memory_bytes: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    disk_mb: int | None = None,
    disk_bytes: int | None = None,
) -> NgramSummary:
    """Train on `lines` (one sentence each) and write `out_dir/model.arpa` and
    `out_dir/training.json` (the summary, with the perplexity of the `heldout` lines).
    `progress(stage, amount)` hears of the sentences read and of each order counted.

    `memory_mb` (default: a quarter of the machine's memory) chooses the path: in memory
    when the estimate of the tables (`_memory_needed`) fits, else out of core, counting in
    sorted runs on disk and estimating a budget's worth of rows at a time, the tables
    kept as files in the scratch folder. `out_of_core` forces either path; `memory_bytes`
    (tests) sets the budget in bytes. Both paths give the same model to the last digit.
    `should_stop()` is asked between stages; yes raises NgramTrainingStopped.
    `disk_mb` bounds the scratch folder (`disk_bytes` in bytes, tests): a write that
    would pass it, or leave under DISK_RESERVE_BYTES free on the disk, raises
    NgramDiskFull before it is made; the peak is `temp_disk_peak_bytes`.
    The scratch folder (`work_dir` or `out_dir`, `.ngram-*`) is removed when the run
    ends, however it ends; one left by a killed run is removed by the next run there."""
    _check_options(order, min_count, memory_mb, disk_mb)
    started = time.perf_counter()
    summary = NgramSummary(order=order, min_count=min_count)
    summary.memory_mb = memory_mb or default_memory_mb()
    summary.disk_mb = disk_mb
    budget = memory_bytes if memory_bytes is not None else summary.memory_mb * 1024 * 1024
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = _new_scratch(work_dir or out_dir)

    def check() -> None:
        if should_stop is not None and should_stop():
            raise NgramTrainingStopped("the n-gram training was stopped")

    disk_limit = disk_bytes if disk_bytes is not None else (disk_mb or 0) * 1024 * 1024
    disk = _Disk(scratch, disk_limit or None)
    try:
        tables, words, store = _count_all(
            lines, scratch, summary, budget, disk, out_of_core, progress, check
        )
        check()
        _estimate(tables, len(words), summary, store)
        check()
        summary.heldout = heldout_perplexity(tables, words, heldout)
        arpa = scratch / ARPA_NAME
        summary.ngrams = _write_arpa(tables, words, arpa, store.lines, store)
        summary.runs = store.runs
        summary.temp_disk_peak_bytes = store.peak
        summary.seconds = round(time.perf_counter() - started, 3)
        os.replace(arpa, out_dir / ARPA_NAME)
        (out_dir / INFO_NAME).write_text(
            json.dumps({"kind": "ngram", **asdict(summary)}, indent=2) + "\n", encoding="utf-8"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return summary


def _check_options(order: int, min_count: int, memory_mb: int | None, disk_mb: int | None) -> None:
    if not MIN_ORDER <= order <= MAX_ORDER:
        raise NgramTrainingError(f"the order must be from {MIN_ORDER} to {MAX_ORDER}; got {order}")
    if min_count < 1:
        raise NgramTrainingError(f"the vocabulary cutoff must be 1 or more; got {min_count}")
    if memory_mb is not None and memory_mb < 1:
        raise NgramTrainingError(f"the memory budget must be 1 MB or more; got {memory_mb}")
    if disk_mb is not None and disk_mb < 1:
        raise NgramTrainingError(f"the temporary disk bound must be 1 MB or more; got {disk_mb}")


def _new_scratch(parent: Path) -> Path:
    """A scratch folder of this process's under `parent`, after removing those of runs
    that were killed there."""
    remove_stale_scratch(parent)
    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=parent))
    (scratch / "pid").write_text(str(os.getpid()), encoding="ascii")
    return scratch


def _count_all(
    lines: Iterable[str],
    scratch: Path,
    summary: NgramSummary,
    budget: int,
    disk: _Disk,
    out_of_core: bool | None,
    progress: Callable[[str, int], None] | None,
    check: Callable[[], None],
) -> tuple[list[_Order], list[str], _Store]:
    """The corpus read into an id stream, its vocabulary, and the raw counts of every order
    up to `summary.order` (in memory, or out of core when the estimate passes `budget`,
    or as `out_of_core` forces); the corpus' facts go into `summary`. The tables (index 0
    a placeholder), the words by id, and the store that holds the tables."""
    stream_path = scratch / "ids.int32"
    counts, provisional, sentences = _write_stream(
        lines,
        stream_path,
        (lambda n: progress("sentences", n)) if progress else None,
        max(16, min(CHUNK_TOKENS, budget // BYTES_PER_READ)),
        disk,
    )
    if sentences == 0:
        raise NgramTrainingError("the corpus has no sentences")
    remap, words, unknown = _vocabulary(counts, provisional, summary.min_count)
    vocab = len(words)
    tokens = stream_path.stat().st_size // 4
    if out_of_core is None:
        out_of_core = _memory_needed(tokens, summary.order) > budget
    store = _Store(scratch if out_of_core else None, budget, disk)
    stream = store.map(stream_path, np.int32)
    summary.counting = "out of core" if out_of_core else "in memory"
    summary.sentences = sentences
    summary.words = int(len(stream) - sentences)
    summary.vocabulary = vocab
    summary.unknown_types = unknown
    tables: list[_Order] = [_Order(keys=np.zeros(1, np.int64), raw=np.zeros(1, np.int64))]
    # Every word of the vocabulary is a unigram (<unk> even when unseen).
    raw = np.bincount(remap, weights=counts, minlength=vocab).astype(np.int64)
    tables.append(_Order(keys=np.arange(vocab, dtype=np.int64), raw=raw))
    for k in range(2, summary.order + 1):
        check()
        tables.append(_count_order(k, stream, remap, tables, vocab, store))
        if progress is not None:
            progress("order", k)
    del stream
    return tables, words, store


def _memory_needed(tokens: int, order: int) -> int:
    """A bound on the in-memory path's peak in bytes: at most one n-gram of each order
    per token, about 12 int64 or float arrays over every table while estimating."""
    return tokens * order * 12 * 8


def remove_stale_scratch(folder: Path) -> list[Path]:
    """Remove the scratch folders in `folder` whose run is gone (its pid no longer runs,
    or no pid was written): what a killed run left. Returns them."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for found in folder.glob(SCRATCH_PREFIX + "*"):
        if not found.is_dir():
            continue
        try:
            pid = int((found / "pid").read_text(encoding="ascii"))
        except (OSError, ValueError):
            pid = 0
        if pid == os.getpid() or (pid and processes.alive(pid)):
            continue  # a live run's (this process's own: another thread's)
        if not pid and time.time() - found.stat().st_mtime < 60:
            continue  # just made: its run has not written its pid yet
        shutil.rmtree(found, ignore_errors=True)
        removed.append(found)
    return removed
    return True
