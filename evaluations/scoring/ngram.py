"""Word n-gram language models as a model kind: ARPA text (plain or gzipped, read here in
pure Python) and CMU Sphinx binaries (read through pocketsphinx).

Both sit behind one interface, `NgramModel`, whose `score_text` turns a sentence into
words with character offsets and surprisals in bits. The engine's `score_sentences` hands
them to the same token-to-region alignment and region metrics as the transformer models,
so pages, diagnostics and predictions treat a word like any other token. A region that
holds characters but no word (only a comma) therefore has no value, as a region that no
subword token starts in.

How a sentence becomes words (README, "n-gram models"):
- Text is split at whitespace; from each chunk, leading and trailing punctuation is
  dropped (an apostrophe directly before a letter or digit stays, so "'s" is a word).
  What remains is lowercased, with the typographic apostrophe written as "'".
- A chunk the vocabulary has is one word ("didn't", "company's", "well-known"). One it
  lacks is split: a clitic after the last apostrophe ("'s", "'ll", "'re", "'ve", "'d",
  "'m", and "n't" as in "wouldn't") becomes a word of its own when the vocabulary has it,
  and a hyphenated chunk becomes its parts. Whatever is still unknown is one
  out-of-vocabulary word. Digits stay as they are (the CMU vocabulary has none, so
  numbers written in digits are out of vocabulary).
- Punctuation inside the sentence is dropped. A sentence-final `.`, `!` or `?` (possibly
  followed by closing quotes or brackets) is the end-of-sentence word `</s>`, scored with
  the offsets of the mark, so it belongs to the region that holds the mark. A sentence
  without one has no `</s>`.
- `<s>` is the context of the first word; it is never scored.

Out-of-vocabulary words: when the model has `<unk>` (KenLM and SRILM `-unk` models do),
an unknown word is scored as `<unk>` in its context. Otherwise it costs `OOV_PENALTY_BITS`
(32 bits, a little more than the rarest word of the CMU trigram, 31.5 bits) and the
context starts again after it, as Sphinx does. Either way it is counted (`oov_words`).
"""

from __future__ import annotations

import gzip
import math
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import kinds
from .schema import ModelLoadError, ScoringError

SENTENCE_START = "<s>"
SENTENCE_END = "</s>"
UNKNOWN = "<unk>"
OOV_PENALTY_BITS = 32.0

LOG2_OF_10 = math.log2(10.0)
# Sphinx returns integers in log base 1.0001, whatever LogMath base it was given.
SPHINX_LOG_BASE = 1.0001
SPHINX_BITS_PER_UNIT = math.log(SPHINX_LOG_BASE) / math.log(2.0)
# What Sphinx returns for a word it does not know (about -2**29: 77,450 bits). Anything at
# or below this is treated as unknown, never as a probability.
SPHINX_UNKNOWN_BELOW = -(2**28)

_TERMINAL = ".!?"
_CLOSERS = "\"'\u2019\u201d)]}\u00bb"
_APOSTROPHES = "'\u2019"
_CHUNK = re.compile(r"\S+")


# --- words ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    text: str  # as the model sees it: lowercased, "'" for the apostrophe, or "</s>"
    start: int  # character offsets in the sentence
    end: int


def _normal(text: str) -> str:
    return text.lower().replace("\u2019", "'")


def _final_mark(text: str) -> tuple[int, int] | None:
    """Offsets of the sentence-final run of `.`, `!`, `?`, if the sentence ends with one."""
    end = len(text)
    while end > 0 and (text[end - 1].isspace() or text[end - 1] in _CLOSERS):
        end -= 1
    if end == 0 or text[end - 1] not in _TERMINAL:
        return None
    start = end - 1
    while start > 0 and text[start - 1] in _TERMINAL:
        start -= 1
    return start, end


def _split_unknown(core: str, start: int, known: Callable[[str], bool]) -> list[Word]:
    """`core` as one word if the vocabulary has it, else split at a clitic or hyphens."""
    word = _normal(core)
    if known(word):
        return [Word(word, start, start + len(core))]
    cut = max(core.rfind(mark) for mark in _APOSTROPHES)
    if 0 < cut < len(core) - 1:
        clitic = _normal(core[cut:])
        if known(clitic):
            return [
                *_split_unknown(core[:cut], start, known),
                Word(clitic, start + cut, start + len(core)),
            ]
        if clitic == "'t" and core[cut - 1] in "nN" and cut > 1 and known("n't"):
            return [
                *_split_unknown(core[: cut - 1], start, known),
                Word("n't", start + cut - 1, start + len(core)),
            ]
    if "-" in core:
        words: list[Word] = []
        offset = 0
        for part in core.split("-"):
            if part:
                words += _split_unknown(part, start + offset, known)
            offset += len(part) + 1
        return words
    return [Word(word, start, start + len(core))]


def segment(text: str, known: Callable[[str], bool]) -> list[Word]:
    """The words of a sentence, as described in the module docstring."""
    words: list[Word] = []
    for match in _CHUNK.finditer(text):
        chunk = match.group()
        i, j = 0, len(chunk)
        while i < j and not chunk[i].isalnum():
            if chunk[i] in _APOSTROPHES and i + 1 < j and chunk[i + 1].isalnum():
                break
            i += 1
        while j > i and not chunk[j - 1].isalnum():
            j -= 1
        if i < j:
            words += _split_unknown(chunk[i:j], match.start() + i, known)
    mark = _final_mark(text)
    if mark is not None:
        words.append(Word(SENTENCE_END, *mark))
    return words


# --- back ends ---------------------------------------------------------------------------


class Backend(Protocol):
    order: int
    vocab_size: int | None

    def known(self, word: str) -> bool: ...

    def bits(self, word: str, history: tuple[str, ...]) -> float:
        """Surprisal of a known `word` after `history` (oldest first, at most order-1)."""
        ...


class ArpaModel:
    """An ARPA back-off model held in dictionaries (log10 probabilities).

    P(w | h) is the longest n-gram (h', w) with h' a suffix of h; every context skipped
    on the way down adds its back-off weight (0 when the context has none).
    """

    def __init__(
        self,
        order: int,
        probs: dict[tuple[str, ...], float],
        backoffs: dict[tuple[str, ...], float],
    ) -> None:
        self.order = order
        self.probs = probs
        self.backoffs = backoffs
        self.vocab_size: int | None = sum(1 for key in probs if len(key) == 1)

    def known(self, word: str) -> bool:
        return (word,) in self.probs

    def log10_prob(self, word: str, history: tuple[str, ...]) -> float:
        penalty = 0.0
        for first in range(len(history) + 1):
            context = history[first:]
            value = self.probs.get((*context, word))
            if value is not None:
                return penalty + value
            penalty += self.backoffs.get(context, 0.0)
        raise ScoringError(f"'{word}' is not in the model's vocabulary")

    def bits(self, word: str, history: tuple[str, ...]) -> float:
        return -self.log10_prob(word, history) * LOG2_OF_10


def _arpa_error(source: str, line_number: int, message: str) -> ModelLoadError:
    return ModelLoadError(f"ARPA file '{source}', line {line_number}: {message}")


def read_arpa(lines: Iterable[str], source: str = "<text>") -> ArpaModel:
    """Parse ARPA text: `\\data\\`, `ngram N=count` lines, one `\\N-grams:` section per
    order with `log10prob w1 .. wN [log10backoff]` lines, and `\\end\\`."""
    declared: dict[int, int] = {}
    seen: dict[int, int] = {}
    probs: dict[tuple[str, ...], float] = {}
    backoffs: dict[tuple[str, ...], float] = {}
    section: int | None = None  # None: before \data\; 0: the counts; N: an N-grams section
    ended = False
    number = 0
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if section is None:
            if line == "\\data\\":
                section = 0
            continue
        if line == "\\end\\":
            ended = True
            break
        header = re.fullmatch(r"\\(\d+)-grams:", line)
        if header:
            section = int(header.group(1))
            if section not in declared:
                raise _arpa_error(source, number, f"section {line} was not declared in \\data\\")
            seen[section] = 0
            continue
        if section == 0:
            count = re.fullmatch(r"ngram\s+(\d+)\s*=\s*(\d+)", line)
            if not count:
                raise _arpa_error(source, number, f"expected 'ngram N=count', found {line[:80]!r}")
            declared[int(count.group(1))] = int(count.group(2))
            continue
        fields = line.split()
        if len(fields) not in (section + 1, section + 2):
            raise _arpa_error(
                source,
                number,
                f"a {section}-gram line needs a log10 probability, {section} word(s) and an "
                f"optional back-off weight; found {len(fields)} fields",
            )
        try:
            values = [float(fields[0])] + ([float(fields[-1])] if len(fields) > section + 1 else [])
        except ValueError:
            raise _arpa_error(source, number, f"not a number in {line[:80]!r}") from None
        if not all(math.isfinite(v) for v in values):
            raise _arpa_error(source, number, f"a value is not finite in {line[:80]!r}")
        key = tuple(fields[1 : section + 1])
        probs[key] = values[0]
        if len(values) == 2:
            backoffs[key] = values[1]
        seen[section] += 1
    if section is None:
        raise ModelLoadError(f"'{source}' is not an ARPA file: no \\data\\ line")
    if not ended:
        raise _arpa_error(source, number, "the file ends before \\end\\ (truncated?)")
    if not declared or 1 not in declared:
        raise ModelLoadError(f"ARPA file '{source}' declares no 1-grams")
    for order, number_declared in sorted(declared.items()):
        if seen.get(order, 0) != number_declared:
            raise ModelLoadError(
                f"ARPA file '{source}' declares {number_declared} {order}-grams but has {seen.get(order, 0)}"
            )
    return ArpaModel(max(declared), probs, backoffs)


def _arpa_lines(path: Path, gzipped: bool) -> Iterator[str]:
    opener = gzip.open if gzipped else open
    with opener(path, "rt", encoding="utf-8", errors="strict") as handle:
        yield from handle


class SphinxModel:
    """A CMU Sphinx binary through pocketsphinx's NGramModel.

    `prob` takes the words newest first and returns an integer in log base 1.0001. The
    LogMath object is kept here as long as the model: the model holds no reference to
    it, and without it values come out as garbage.
    """

    def __init__(self, path: Path, fmt: str) -> None:
        try:
            import pocketsphinx
        except ImportError as exc:
            raise ModelLoadError(
                "CMU Sphinx models need the pocketsphinx package on the worker "
                "(pip install -r requirements.txt)"
            ) from exc
        pocketsphinx.set_loglevel("ERROR")
        self._logmath = pocketsphinx.LogMath()
        try:
            self._model = pocketsphinx.NGramModel(pocketsphinx.Config(), self._logmath, str(path))
        except (ValueError, RuntimeError) as exc:
            raise ModelLoadError(f"Sphinx model '{path}' cannot be read: {exc}") from exc
        self.order = int(self._model.size())
        self.vocab_size = _sphinx_trie_unigrams(path) if fmt == kinds.SPHINX_TRIE else None
        self._known: dict[str, bool] = {}
        self._lock = threading.Lock()

    def known(self, word: str) -> bool:
        found = self._known.get(word)
        if found is None:
            with self._lock:
                found = self._model.prob([word]) > SPHINX_UNKNOWN_BELOW
            self._known[word] = found
        return found

    def bits(self, word: str, history: tuple[str, ...]) -> float:
        with self._lock:
            value = self._model.prob([word, *reversed(history)])
        if value <= SPHINX_UNKNOWN_BELOW:
            raise ScoringError(f"'{word}' is not in the model's vocabulary")
        return -value * SPHINX_BITS_PER_UNIT


def _sphinx_trie_unigrams(path: Path) -> int | None:
    """The unigram count from a trie file's header: magic, order byte, uint32 counts."""
    magic = b"Trie Language Model"
    with path.open("rb") as handle:
        head = handle.read(len(magic) + 5)
    if len(head) < len(magic) + 5:
        return None
    return int(struct.unpack("<I", head[len(magic) + 1 :])[0])


# --- the model ---------------------------------------------------------------------------


@dataclass
class WordScore:
    word: Word
    surprisal: float
    oov: bool


@dataclass(eq=False)
class NgramModel:
    """A loaded n-gram model; `kind` is "ngram" so the engine can tell it from a
    transformers model."""

    source: str
    format: str
    backend: Backend  # ArpaModel or SphinxModel
    kind: str = kinds.NGRAM
    revision: str | None = None
    device: str = "cpu"
    dtype: str = "float64"
    notes: list[str] = field(default_factory=list)
    # No subword tokenizer: words are the tokens. Callers that name a model's tokenizer
    # (the minimal-pair token table) see None and use the model's name.
    tokenizer: None = None
    # As LoadedModel.named: the artifact: source asked for, where `source` is the cache's.
    named: str = ""

    @property
    def order(self) -> int:
        return int(self.backend.order)

    @property
    def has_unk(self) -> bool:
        return self.backend.known(UNKNOWN)

    def score_text(self, text: str) -> list[WordScore]:
        """Each word of `text` with its surprisal (bits) given `<s>` and the words before."""
        backend = self.backend
        keep = self.order - 1
        unk = self.has_unk
        history: list[str] = [SENTENCE_START] if backend.known(SENTENCE_START) else []
        scores: list[WordScore] = []
        for word in segment(text, backend.known):
            context = tuple(history[len(history) - keep :]) if keep > 0 else ()
            if backend.known(word.text):
                scores.append(WordScore(word, backend.bits(word.text, context), False))
                history.append(word.text)
            elif unk:
                scores.append(WordScore(word, backend.bits(UNKNOWN, context), True))
                history.append(UNKNOWN)
            else:
                scores.append(WordScore(word, OOV_PENALTY_BITS, True))
                history = []
        return scores

    def info(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.named or self.source,
            "revision": None,
            "format": self.format,
            "order": self.order,
            "vocab_size": self.backend.vocab_size,
            "unknown_words": (
                "scored as <unk>"
                if self.has_unk
                else f"{OOV_PENALTY_BITS:g} bits, and the context restarts after it"
            ),
            "device": self.device,
            "notes": list(self.notes),
        }


def load_ngram(source: str) -> NgramModel:
    """Read an n-gram file; ModelLoadError (for the person who asked) if it cannot be."""
    path = Path(source).expanduser()
    if not path.is_file():
        raise ModelLoadError(f"n-gram model file '{source}' does not exist on this machine")
    fmt = kinds.ngram_format(path)
    if fmt is None:
        raise ModelLoadError(f"'{source}' is not {kinds.NGRAM_FORMATS_TEXT}")
    backend: Backend
    if fmt in (kinds.SPHINX_TRIE, kinds.SPHINX_DMP):
        backend = SphinxModel(path, fmt)
    else:
        try:
            backend = read_arpa(_arpa_lines(path, fmt == kinds.ARPA_GZ), source)
        except (UnicodeDecodeError, OSError, EOFError) as exc:
            raise ModelLoadError(f"ARPA file '{source}' cannot be read: {exc}") from exc
    model = NgramModel(source=source, format=fmt, backend=backend)
    if not backend.known(SENTENCE_START):
        model.notes.append("the model has no <s>: the first word has no sentence context")
    if not backend.known(SENTENCE_END):
        model.notes.append("the model has no </s>: sentence-final marks are unknown words")
    return model


# --- sentences ---------------------------------------------------------------------------


def score_texts(
    model: NgramModel,
    texts: Sequence[str],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[list[WordScore]]:
    """The scored words of each sentence; identical sentences are scored once.

    The engine (`score_sentences`) turns them into tokens and regions exactly as it does
    subword tokens.
    """
    total = len(texts)
    if progress is not None:
        progress(0, total)
    cache: dict[str, list[WordScore]] = {}
    results: list[list[WordScore]] = []
    step = max(total // 20, 1)
    for done, text in enumerate(texts, start=1):
        words = cache.get(text)
        if words is None:
            words = cache[text] = model.score_text(text)
        results.append(words)
        if progress is not None and (done % step == 0 or done == total):
            progress(done, total)
    return results
