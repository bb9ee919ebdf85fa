"""The corpus check: how many of the sentences of the suites, minimal-pair sets and
probing tasks a run is evaluated on occur in its training corpus (`suites.corpora.overlap`
says how they are compared). Shown on the training form before a run is asked for
(GET /api/corpora/<name>/overlap/) and on the run's page and API.

Each benchmark's answer is cached per (corpus content, benchmark content, normalisation),
so the corpus is read once for a benchmark, however often pages ask; the benchmarks not
cached yet are all checked in one pass over the corpus."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.core.cache import cache

from suites.corpora import overlap
from suites.corpora.models import Corpus
from suites.corpora.services import corpus_local_path
from suites.models import (
    Item,
    MinimalPairSet,
    PairSetSentence,
    ProbingInstance,
    ProbingTask,
    Suite,
)

# Found sentences each benchmark's answer shows (normalised), as examples.
EXAMPLES = 3
# A month: the key names the contents, so an old answer is never a wrong one.
CACHE_SECONDS = 30 * 24 * 3600
Benchmark = Suite | MinimalPairSet | ProbingTask


def _kind(benchmark: Benchmark) -> str:
    if isinstance(benchmark, Suite):
        return "suite"
    return "pairs" if isinstance(benchmark, MinimalPairSet) else "probing"


def _texts(benchmark: Benchmark) -> Iterable[str]:
    """Every sentence of `benchmark` as its runs score it: a suite's items in each
    condition (the regions joined by spaces), a pair set's sentences, a probing task's
    sentences of all three partitions."""
    if isinstance(benchmark, Suite):
        rows = Item.objects.filter(suite=benchmark).values_list("conditions", flat=True)
        for conditions in rows.iterator():
            for condition in conditions:
                yield " ".join(str(region) for region in condition["regions"])
    elif isinstance(benchmark, MinimalPairSet):
        yield from (
            PairSetSentence.objects.filter(pair_set=benchmark)
            .values_list("sentence", flat=True)
            .iterator()
        )
    else:
        yield from (
            ProbingInstance.objects.filter(task=benchmark)
            .values_list("sentence", flat=True)
            .iterator()
        )


def benchmark_sentences(benchmark: Benchmark) -> set[str]:
    """The benchmark's distinct sentences, normalised (an empty one left out)."""
    return {s for s in map(overlap.normalised, _texts(benchmark)) if s}


def _key(corpus: Corpus, benchmark: Benchmark) -> str:
    return (
        f"corpus-check:{overlap.VERSION}:{corpus.content_hash}:{_kind(benchmark)}:"
        f"{benchmark.content_hash}"
    )


def _answers(corpus: Corpus, missing: Sequence[Benchmark]) -> dict[str, dict[str, Any]]:
    """Each benchmark of `missing` checked against the corpus in one pass, by cache key."""
    sentences = {_key(corpus, b): benchmark_sentences(b) for b in missing}
    found = overlap.sentences_found(corpus_local_path(corpus), set().union(*sentences.values()))
    answers = {}
    for key, own in sentences.items():
        seen = own & found
        answers[key] = {
            "sentences": len(own),
            "found": len(seen),
            "examples": sorted(seen)[:EXAMPLES],
        }
    return answers


def corpus_check(corpus: Corpus, benchmarks: Sequence[Benchmark]) -> dict[str, Any]:
    """{"benchmarks": [{"kind", "name", "sentences", "found", "share", "examples"}, ...],
    "found": how many benchmarks have a sentence in the corpus, "error": "" or why the
    corpus could not be read}. A benchmark named twice is checked and listed once."""
    unique = list({(_kind(b), b.pk): b for b in benchmarks}.values())
    keys = [_key(corpus, b) for b in unique]
    known: dict[str, Any] = cache.get_many(keys)
    missing = [b for b, key in zip(unique, keys, strict=True) if key not in known]
    error = ""
    if missing:
        try:
            fresh = _answers(corpus, missing)
        except OSError as exc:
            fresh = {}
            error = f"the corpus file cannot be read ({exc.strerror or exc}); check it again later"
        cache.set_many(fresh, timeout=CACHE_SECONDS)
        known.update(fresh)
    rows = [_row(b, known.get(key)) for b, key in zip(unique, keys, strict=True)]
    return {"benchmarks": rows, "found": sum(1 for r in rows if r["found"]), "error": error}


def _row(benchmark: Benchmark, answer: dict[str, Any] | None) -> dict[str, Any]:
    answer = answer or {"sentences": None, "found": None, "examples": []}
    total, found = answer["sentences"], answer["found"]
    share = found / total if total and found is not None else None
    return {"kind": _kind(benchmark), "name": benchmark.name, **answer, "share": share}


def run_check(run: Any) -> dict[str, Any]:
    """The check of a training run's corpus against its benchmarks."""
    benchmarks: list[Benchmark] = [
        *run.suites.order_by("name"),
        *run.pair_sets.order_by("name"),
        *run.probing_tasks.order_by("name"),
    ]
    return corpus_check(run.corpus, benchmarks)
