"""What a probe's accuracy is measured against, beyond the majority and length baselines:
which baselines apply to which task type, the frequency baseline's feature (a target
form's unigram log-probability in a model trained on a large corpus), and the control
task's labels (Hewitt and Liang 2019).

Pure Python + numpy, no Django; the CMU model is read through pocketsphinx only when a
frequency baseline is computed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

import numpy as np

from suites.formats.probing import PARTITIONS, ProbingInstance

# How many probes a layer gets by default, and at most (each with its own seed); here,
# not in `run`, so that the site reads them without loading torch.
DEFAULT_SEEDS = 3
MAX_SEEDS = 10
# The first probe's seed; the others count up from it.
SEED = 1234

CONTROL_SEED = 4321
# Word-type controls: a form's control label is a function of the form itself.
WORD_TYPE = "word type"
SENTENCE = "sentence"

# SentEval's tense and number tasks keep the target form in field #3 (the first extra
# column) in their full release; the frequency baseline reads it from there.
FORM_TASKS = ("past_present", "subj_number", "obj_number")

# Which baselines and which control apply to each task type. Tasks whose label is a
# property of one word form (tense of the main verb, number of a noun) get the frequency
# baseline; the control is "word type" where the label belongs to a form (or is one, as
# in word_content), else a permutation of the sentences' labels.
_NO_FORM = "the label is not a property of one word form"
APPLICABLE: dict[str, dict[str, Any]] = {
    "bigram_shift": {"frequency": False, "control": SENTENCE, "why": _NO_FORM},
    "coordination_inversion": {"frequency": False, "control": SENTENCE, "why": _NO_FORM},
    "obj_number": {"frequency": True, "control": WORD_TYPE, "why": "the object noun's form"},
    "odd_man_out": {
        "frequency": False,
        "control": SENTENCE,
        "why": "in an original sentence, which word's frequency to use is arbitrary",
    },
    "past_present": {"frequency": True, "control": WORD_TYPE, "why": "the main verb's form"},
    "sentence_length": {"frequency": False, "control": SENTENCE, "why": _NO_FORM},
    "subj_number": {"frequency": True, "control": WORD_TYPE, "why": "the subject noun's form"},
    "top_constituents": {"frequency": False, "control": SENTENCE, "why": _NO_FORM},
    "tree_depth": {"frequency": False, "control": SENTENCE, "why": _NO_FORM},
    "word_content": {"frequency": False, "control": WORD_TYPE, "why": "the label is the word"},
    "custom": {"frequency": False, "control": SENTENCE, "why": "no known target-form column"},
}


def applicable_table() -> list[dict[str, Any]]:
    """One row per task type: majority and length always, frequency and control kind."""
    return [
        {"task_type": name, "majority": True, "length": True, **row}
        for name, row in APPLICABLE.items()
    ]


def target_forms(instances: Sequence[ProbingInstance]) -> list[str] | None:
    """Field #3 of each line (the first extra column), or None when any line lacks it."""
    forms = [item.extra[0].strip() if item.extra else "" for item in instances]
    return forms if forms and all(forms) else None


# --- the frequency source ---------------------------------------------------------------


CMU_SOURCE = "CMU US English trigram unigrams"


def corpus_source_name(name: str, words: int) -> str:
    """How pages and exports name a corpus as the frequency source."""
    return f"corpus {name} ({words} words)"


def unigram_key(form: str) -> str:
    """A form as the frequency sources look it up: lowercased, typographic apostrophe
    made plain."""
    return form.lower().replace("\u2019", "'")


class UnigramSource(Protocol):
    name: str
    fallback: float  # log10 probability of a form the source lacks

    def log10(self, form: str) -> float | None: ...


@dataclass
class CmuUnigrams:
    """Unigram log10 probabilities of the CMU US English trigram (pocketsphinx's)."""

    backend: Any  # evaluations.scoring.ngram.SphinxModel
    # The n-gram scorer's cost of an out-of-vocabulary word (32 bits), as a log10 value.
    fallback: float
    name: str = CMU_SOURCE

    def log10(self, form: str) -> float | None:
        word = unigram_key(form)
        if not self.backend.known(word):
            return None
        return -self.backend.bits(word, ()) / math.log2(10.0)


@cache
def cmu_unigrams() -> CmuUnigrams | None:
    """The bundled CMU model, loaded once; None when pocketsphinx or its model is absent."""
    from evaluations.baseline import cmu_trigram_path
    from evaluations.scoring.ngram import OOV_PENALTY_BITS, load_ngram
    from evaluations.scoring.schema import ModelLoadError

    path = cmu_trigram_path()
    if path is None:
        return None
    try:
        model = load_ngram(str(path))
    except ModelLoadError:
        return None
    return CmuUnigrams(backend=model.backend, fallback=-OOV_PENALTY_BITS / math.log2(10.0))


@dataclass
class CorpusUnigrams:
    """Unigram log10 relative frequencies of the forms a task needs, counted in a corpus:
    log10(count / words), where words is every whitespace-separated word of the corpus
    (its word count). A form the corpus lacks (count 0) falls back to half a count,
    log10(0.5 / words): below every form the corpus has, and the same for all of them."""

    counts: dict[str, int]
    words: int
    name: str
    fallback: float

    def log10(self, form: str) -> float | None:
        count = self.counts.get(unigram_key(form), 0)
        if count == 0:
            return None
        return math.log10(count / self.words)


def corpus_unigrams(lines: Iterable[str], forms: Iterable[str], *, name: str) -> CorpusUnigrams:
    """Count `forms` (lowercased) over the corpus's lines, streamed: memory holds one line
    and one count per distinct form, whatever the corpus's size. Words are the corpus's
    whitespace-separated tokens, lowercased, as they are stored (punctuation attached to a
    word stays part of it)."""
    counts = dict.fromkeys({unigram_key(form) for form in forms}, 0)
    words = 0
    for line in lines:
        tokens = unigram_key(line).split()
        words += len(tokens)
        for token in tokens:
            if token in counts:
                counts[token] += 1
    if words == 0:
        raise ValueError(f"the corpus {name} has no words to count")
    return CorpusUnigrams(
        counts=counts,
        words=words,
        name=corpus_source_name(name, words),
        fallback=math.log10(0.5 / words),
    )


def frequency_features(forms: Sequence[str], source: UnigramSource) -> tuple[np.ndarray, int]:
    """Each form's log10 probability (the source's fallback where it lacks the form), and
    how many forms fell back."""
    values = np.empty(len(forms), dtype=np.float64)
    fell_back = 0
    seen: dict[str, float | None] = {}
    for i, form in enumerate(forms):
        if form not in seen:
            seen[form] = source.log10(form)
        value = seen[form]
        if value is None:
            fell_back += 1
            value = source.fallback
        values[i] = value
    return values, fell_back


# --- control tasks ----------------------------------------------------------------------


def control_kind(task_type: str, forms: Sequence[str] | None) -> str:
    """Word-type control where the label belongs to a form the file names, else sentence."""
    row = APPLICABLE.get(task_type, APPLICABLE["custom"])
    if row["control"] == WORD_TYPE and (task_type == "word_content" or forms is not None):
        return WORD_TYPE
    return SENTENCE


def control_labels(
    instances: Sequence[ProbingInstance],
    rows: dict[str, np.ndarray],
    y: dict[str, np.ndarray],
    n_classes: int,
    *,
    kind: str,
    forms: Sequence[str] | None = None,
    seed: int = CONTROL_SEED,
) -> dict[str, np.ndarray]:
    """Control labels per partition, drawn with a fixed seed.

    sentence: each partition's labels permuted over its sentences (the label counts stay).
    word type: every form (word_content: every target word) gets one label drawn from
    tr's label distribution, and each sentence takes its form's label; a form's sentences
    all agree, so only memorising forms helps.
    """
    rng = np.random.default_rng(seed)
    if kind == SENTENCE:
        return {name: rng.permutation(y[name]) for name in PARTITIONS}
    keys = [
        (forms[i] if forms is not None else item.label).lower() for i, item in enumerate(instances)
    ]
    prior = np.bincount(y["tr"], minlength=n_classes) / max(len(y["tr"]), 1)
    types = sorted(set(keys))
    drawn = rng.choice(n_classes, size=len(types), p=prior)
    label_of = dict(zip(types, drawn.tolist(), strict=True))
    return {
        name: np.asarray([label_of[keys[i]] for i in rows[name]], dtype=np.int64)
        for name in PARTITIONS
    }


def seeds_of(k: int) -> list[int]:
    """The seeds of k probes: SEED first (a one-seed run is the single probe of before)."""
    return [SEED + i for i in range(k)]
