"""Minimal pairs at BLiMP size: reading, analysis, and the engine on a slice.

Generates a BLiMP-shaped JSONL set (67 paradigms x 1,000 pairs = 67,000 pairs, 134,000
sentences, agreement pairs with condition fields) and prints:

- parse: reading the JSONL, and its NLPScholar TSV export, into a set (seconds);
- predictions import: writing and reading back a token table for all 134,000 sentences
  (NLPScholar's evaluate columns), the path of `analyze --pred` and of imports;
- analysis: by_pair and by_cond over all 134,000 sentences' tokens (target: under 5 s),
  and by_word separately;
- import: the set into a throw-away SQLite database through the import service (one
  transaction; target under 20 s), and the set page's server time and query count;
- result page: the token table stored as a run, then its result page's server time
  (first request: the analysis, then cached; later requests: target under 300 ms) and
  query count, the same as for a run on a 30-pair set;
- engine: tokens/s (per wall-clock and per CPU second) of the evaluate path (scoring +
  word alignment) on a suite-sized slice of the pairs, against the plain engine on
  SyntaxGym suite sentences of about the same token count, with the GPT-2-small-shaped
  model of benchmarks/scoring.py; the pair path on the suites' own sentences (the
  path's cost apart from the data's), and the work prefix sharing leaves per token on
  each (`--threads N` sets torch's threads, `--suites-dir` the suites' folder).

    .venv/bin/python benchmarks/minimal_pairs.py            # full (engine part: minutes on CPU)
    .venv/bin/python benchmarks/minimal_pairs.py --smoke    # tiny model, 2,000 pairs
    .venv/bin/python benchmarks/minimal_pairs.py --skip-engine
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.end_to_end import throwaway_database  # noqa: E402

FIELDS = ["morphology", "syntax", "semantics", "syntax_semantics"]
ADJECTIVES = ["old", "young", "tall", "quiet", "famous", "careful", "tired", "happy", "brave"]
NOUNS = [
    ("author", "authors"),
    ("senator", "senators"),
    ("pilot", "pilots"),
    ("doctor", "doctors"),
    ("teacher", "teachers"),
    ("farmer", "farmers"),
    ("guard", "guards"),
    ("reporter", "reporters"),
    ("captain", "captains"),
    ("lawyer", "lawyers"),
]
VERBS = [("admires", "admire"), ("sees", "see"), ("praises", "praise"), ("likes", "like")]
OBJECTS = ["the book", "a river", "the village", "every painting", "the old cabinet", "a storm"]


def generate_blimp(n_paradigms: int, per_paradigm: int, seed: int = 0) -> str:
    """BLiMP-shaped JSONL: one pair per line, the verb agreeing or not with its subject."""
    rng = random.Random(seed)
    lines = []
    for paradigm in range(n_paradigms):
        uid = f"paradigm_{paradigm:02d}"
        field = FIELDS[paradigm % len(FIELDS)]
        for k in range(per_paradigm):
            singular, plural = rng.choice(NOUNS)
            plural_subject = rng.random() < 0.5
            noun = plural if plural_subject else singular
            good, bad = rng.choice(VERBS)
            if plural_subject:
                good, bad = bad, good
            middle = f" near the {rng.choice(NOUNS)[rng.randrange(2)]}" if k % 3 == 0 else ""
            start = f"The {rng.choice(ADJECTIVES)} {noun}{middle}"
            tail = f"{rng.choice(OBJECTS)}."
            lines.append(
                json.dumps(
                    {
                        "sentence_good": f"{start} {good} {tail}",
                        "sentence_bad": f"{start} {bad} {tail}",
                        "field": field,
                        "linguistics_term": "subject_verb_agreement",
                        "UID": uid,
                        "simple_LM_method": True,
                        "pairID": str(paradigm * per_paradigm + k),
                    }
                )
            )
    return "\n".join(lines) + "\n"


def synthetic_tokens(pair_set: Any, seed: int = 0) -> Any:
    """A token table as a model would give it: every third word in two pieces."""
    import numpy as np

    from evaluations.minimal_pairs.tokens import TokenTable
    from suites.formats.minimal_pairs import split_words

    token: list[str] = []
    sentid: list[str] = []
    word: list[str] = []
    wordpos: list[int] = []
    punct: list[bool] = []
    for sentence in pair_set.sentences:
        for position, w in enumerate(split_words(sentence.sentence)):
            pieces = [w.text[:2], w.text[2:]] if position % 3 == 2 and len(w.text) > 2 else [w.text]
            for piece in pieces:
                token.append(piece)
                sentid.append(sentence.sentid)
                word.append(w.text)
                wordpos.append(position)
                punct.append(w.punctuation)
    n = len(token)
    rng = np.random.default_rng(seed)
    surp = rng.gamma(2.0, 3.0, n)
    return TokenTable(
        token=token,
        sentid=sentid,
        word=word,
        wordpos=np.asarray(wordpos, dtype=np.int64),
        model=["synthetic"] * n,
        tokenizer=["synthetic"] * n,
        punctuation=np.asarray(punct, dtype=bool),
        prob=np.exp2(-surp),
        surp=surp,
    )


def timed(label: str, figures: dict[str, Any], fn: Any) -> Any:
    """Wall-clock seconds, and this process's CPU seconds: on a shared machine the
    second says what the work costs whatever the load."""
    started = time.perf_counter()
    cpu = time.process_time()
    value = fn()
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu
    figures[label] = round(seconds, 3)
    figures[label.removesuffix("_s") + "_cpu_s"] = round(cpu_seconds, 3)
    print(f"{label}: {seconds:.2f} s (CPU {cpu_seconds:.2f} s)", flush=True)
    return value


def bench_scoring_module() -> Any:
    """benchmarks/scoring.py by path: the benchmarks folder must not shadow the `suites` app."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_scoring", REPO / "benchmarks" / "scoring.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def engine_model(args: argparse.Namespace, bench_scoring: Any, folder: Path) -> Any:
    from evaluations.scoring import build_sentence, load_model

    cache = Path(tempfile.gettempdir()) / "gym-bench"
    if args.smoke:
        model_dir = bench_scoring.build_tiny(cache / "tiny-gpt2-256")
    else:
        # The tokenizer is trained on all the suites, as benchmarks/scoring.py does, so
        # that both scripts share one cached model.
        everything = bench_scoring.load_suites(folder, None)
        texts = [build_sentence(regions)[0] for regions in everything]
        model_dir = bench_scoring.build_gpt2_small(cache / "gpt2-small-random", texts)
    return load_model(str(model_dir), device=args.device, dtype=args.dtype)


def rate(fn: Any) -> tuple[int, float, float]:
    """Tokens, tokens per wall-clock second and per CPU second of this process.

    Each measurement starts from a fresh collection, so that a full collection of
    Python's garbage collector lands in none of them by chance."""
    gc.collect()
    started = time.perf_counter()
    cpu = time.process_time()
    tokens = fn()
    wall = time.perf_counter() - started
    return tokens, tokens / wall, tokens / max(time.process_time() - cpu, 1e-9)


def best_rates(cases: dict[str, Any], rounds: int) -> dict[str, tuple[int, float, float]]:
    """Each case's best wall-clock and best CPU rate over `rounds` rounds; the cases
    alternate within a round, so a burst of load on the machine hits all of them."""
    best: dict[str, tuple[int, float, float]] = {}
    for _ in range(max(1, rounds)):
        for name, fn in cases.items():
            tokens, wall, cpu = rate(fn)
            old = best.get(name, (tokens, 0.0, 0.0))
            best[name] = (tokens, max(old[1], wall), max(old[2], cpu))
    return best


def work_per_token(lm: Any, texts: list[str]) -> dict[str, float]:
    """What prefix sharing leaves to compute per scored token: token positions run
    through the body (padded) and rows through the output head. The engine's rate
    follows these, so they say how much of a difference in tokens/s is the data."""
    from evaluations.scoring import causal
    from evaluations.scoring.engine import default_token_budget

    encoded = lm.tokenizer(texts, add_special_tokens=False)["input_ids"]
    unique = [list(ids) for ids in dict.fromkeys(tuple(ids) for ids in encoded)]
    sequences, _ = causal.plan_sequences(unique, lm.bos_token_id, lm.context_length)
    stats = causal.work_stats(sequences, token_budget=default_token_budget(lm), prefix_sharing=True)
    tokens = sum(len(ids) for ids in encoded)
    return {
        "padded_positions_per_token": round(stats["padded_positions"] / tokens, 3),
        "head_rows_per_token": round(stats["head_rows"] / tokens, 3),
    }


def pair_set_of(texts: list[str], like: Any) -> Any:
    """Sentences as a minimal-pair set (for the pair path on the suites' sentences)."""
    import dataclasses

    from suites.formats.minimal_pairs import MinimalPairSet

    first = like.sentences[0]
    return MinimalPairSet(
        sentences=[
            dataclasses.replace(first, sentid=str(i), sentence=text) for i, text in enumerate(texts)
        ],
        columns=like.columns,
        condition_columns=like.condition_columns,
        source_format=like.source_format,
    )


def engine_figures(args: argparse.Namespace, pair_set: Any, figures: dict[str, Any]) -> None:
    from evaluations.minimal_pairs.evaluate import evaluate_minimal_pairs
    from evaluations.scoring import build_sentence, score_sentences

    bench_scoring = bench_scoring_module()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    folder = args.suites_dir or bench_scoring.DEFAULT_SUITES
    suites = bench_scoring.load_suites(folder, 2 if args.smoke else 4)
    lm = engine_model(args, bench_scoring, folder)
    score_sentences(lm, suites[:8])  # warm-up
    # What is alive now (the 134,000 sentences and token tables above, torch and
    # transformers) stays alive; frozen, the collector no longer walks it during the
    # measurements (a full collection over it took about 0.5 s, landing on whichever
    # path happened to allocate at that moment, most often the pairs' token rows).
    gc.collect()
    gc.freeze()

    def engine(sentences: list[list[str]], sharing: bool = True) -> Any:
        return lambda: sum(
            len(r.tokens) for r in score_sentences(lm, sentences, prefix_sharing=sharing)
        )

    def pair_path(part: Any) -> Any:
        return lambda: len(evaluate_minimal_pairs(lm, part, model_name="b"))

    suite_texts = [build_sentence(regions).text for regions in suites]
    encoded = lm.tokenizer(suite_texts, add_special_tokens=False)["input_ids"]
    part = pair_slice(pair_set, sum(len(ids) for ids in encoded))
    texts = [[s.sentence] for s in part.sentences]
    # The pair path (evaluate, word alignment included) on the suites' own sentences is
    # the same data through both paths: any difference is the path's, not the data's.
    # Prefix sharing pays off in proportion to repeated prefixes, which suites have more
    # of (conditions repeat most regions); without it both are plain batched passes.
    best = best_rates(
        {
            "suite": engine(suites),
            "pair": pair_path(part),
            "pair_path_on_suite_sentences": pair_path(pair_set_of(suite_texts, pair_set)),
            "suite_no_prefix_sharing": engine(suites, sharing=False),
            "pair_no_prefix_sharing": engine(texts, sharing=False),
        },
        args.repeat,
    )
    figures["engine"] = {
        "model": str(lm.source),
        "device": lm.device,
        "torch_threads": torch_threads(),
        "rounds": args.repeat,
        "suite_sentences": len(suites),
        "suite_tokens": best["suite"][0],
        "suite_work": work_per_token(lm, suite_texts),
        "pair_sentences": len(part.sentences),
        "pair_tokens": best["pair"][0],
        "pair_work": work_per_token(lm, [s.sentence for s in part.sentences]),
    }
    for name, (_, wall, cpu) in best.items():
        base, plain, _ = name.partition("_no_prefix_sharing")
        figures["engine"][f"{base}_tokens_per_s{plain}"] = round(wall, 1)
        figures["engine"][f"{base}_tokens_per_cpu_s{plain}"] = round(cpu, 1)
    print_engine(figures["engine"])


def pair_slice(pair_set: Any, suite_tokens: int) -> Any:
    """The first pairs, with about as many tokens as the suites (every paradigm of the
    generated set comes from the same templates, so the first are as good as any)."""
    from suites.formats.minimal_pairs import MinimalPairSet

    per_sentence = max(1.0, len(pair_set.sentences[0].sentence) / 4.5)
    count = min(len(pair_set.sentences), max(2, int(suite_tokens / per_sentence)) // 2 * 2)
    return MinimalPairSet(
        sentences=pair_set.sentences[:count],
        columns=pair_set.columns,
        condition_columns=pair_set.condition_columns,
        source_format=pair_set.source_format,
    )


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def print_engine(engine: dict[str, Any]) -> None:
    print(
        f"engine ({engine['torch_threads']} torch threads): suites {engine['suite_tokens']} "
        f"tokens: {engine['suite_tokens_per_s']:,.0f} tokens/s, "
        f"{engine['suite_tokens_per_cpu_s']:,.0f} per CPU s "
        f"({engine['suite_tokens_per_s_no_prefix_sharing']:,.0f} without prefix sharing); "
        f"minimal pairs (evaluate, incl. word alignment) {engine['pair_tokens']} tokens of "
        f"{engine['pair_sentences']} sentences: {engine['pair_tokens_per_s']:,.0f} tokens/s, "
        f"{engine['pair_tokens_per_cpu_s']:,.0f} per CPU s "
        f"({engine['pair_tokens_per_s_no_prefix_sharing']:,.0f} without prefix sharing); "
        f"the pair path on the suites' sentences: "
        f"{engine['pair_path_on_suite_sentences_tokens_per_s']:,.0f} tokens/s, "
        f"{engine['pair_path_on_suite_sentences_tokens_per_cpu_s']:,.0f} per CPU s",
        flush=True,
    )
    for name in ("suite_work", "pair_work"):
        print(f"  {name} per scored token: {engine[name]}", flush=True)


def database_figures(text: str, figures: dict[str, Any], tokens: Any = None) -> None:
    """Import through the site's service into a throw-away SQLite database, then render
    the set page (first and last page of pairs) and count its queries; with `tokens`,
    store them as a run and time its result page too."""
    throwaway_database(tempfile.mkdtemp(prefix="gym-bench-"), replace=True)
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    from suites.minimal_pairs import sets as pair_sets

    setup_test_environment()
    report = timed(
        "db_import_s",
        figures,
        lambda: pair_sets.minimal_pair_set_import(
            data=text, filename="bench.jsonl", name="bench", owner=None
        ),
    )
    client = Client()
    last = (report.pair_set.pair_count + 49) // 50
    for label, url in (
        ("first", "/minimal-pairs/bench/"),
        ("last", f"/minimal-pairs/bench/?page={last}"),
    ):
        client.get(url)  # warm-up
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url)
            seconds = time.perf_counter() - started
        assert response.status_code == 200, response.status_code
        figures[f"set_page_{label}_ms"] = round(seconds * 1000, 1)
        figures[f"set_page_{label}_queries"] = len(queries.captured_queries)
        print(f"set page ({label} page): {seconds * 1000:.0f} ms, {len(queries)} queries")
    if tokens is not None:
        result_page_figures(client, report.pair_set, tokens, figures)


def store_pair_run(pair_set: Any, tokens: Any, model: Any) -> Any:
    """A done run of `model` on the stored set whose token table is `tokens` (packed per
    sentence with the table's own words, as an import of NLPScholar predictions is)."""
    from collections import defaultdict

    from django.utils import timezone

    from evaluations.models import PairEvaluation, PairSentenceTokens
    from evaluations.token_data import pack_word_tokens

    rows: dict[str, list[int]] = defaultdict(list)
    for i, sentid in enumerate(tokens.sentid):
        rows[sentid].append(i)
    run = PairEvaluation.objects.create(
        model=model,
        pair_set=pair_set,
        content_hash=pair_set.content_hash,
        origin="imported",
        status=PairEvaluation.Status.DONE,
        finished_at=timezone.now(),
    )
    surp, wordpos, punct = (
        tokens.surp.tolist(),
        tokens.wordpos.tolist(),
        tokens.punctuation.tolist(),
    )
    sentids = pair_set.sentences.order_by("position").values_list("sentid", flat=True)
    PairSentenceTokens.objects.bulk_create(
        (
            PairSentenceTokens(
                evaluation=run,
                position=position,
                sentid=sentid,
                tokens=pack_word_tokens(
                    [tokens.token[i] for i in rows[sentid]],
                    [surp[i] for i in rows[sentid]],
                    [tokens.word[i] for i in rows[sentid]],
                    [wordpos[i] for i in rows[sentid]],
                    [punct[i] for i in rows[sentid]],
                ),
            )
            for position, sentid in enumerate(sentids)
        ),
        batch_size=2000,
    )
    return run


def result_page_figures(client: Any, pair_set: Any, tokens: Any, figures: dict[str, Any]) -> None:
    """The result page of a run on the whole set: the first request (analysis, then
    cached), later ones (another page of pairs, a condition, a tab), and the query count
    against a run on a 30-pair set."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from evaluations.models import LanguageModel
    from suites.minimal_pairs import sets as pair_sets

    model = LanguageModel.objects.create(name="bench", display_name="Bench", source="bench")
    run = timed("store_run_tokens_s", figures, lambda: store_pair_run(pair_set, tokens, model))
    small_text = generate_blimp(1, 30)
    small = pair_sets.minimal_pair_set_import(
        data=small_text, filename="s.jsonl", name="small", owner=None
    )
    from suites.formats.minimal_pairs import parse_minimal_pairs

    small_run = store_pair_run(
        small.pair_set, synthetic_tokens(parse_minimal_pairs(small_text)), model
    )
    last = (pair_set.pair_count + 49) // 50

    def get(pk: int, query: str = "") -> tuple[float, int]:
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(f"/pairs/evaluations/{pk}/{query}")
            seconds = time.perf_counter() - started
        assert response.status_code == 200, (response.status_code, query)
        return seconds * 1000, len(queries.captured_queries)

    cpu = time.process_time()
    cold_ms, cold_queries = get(run.pk)
    cold_cpu = time.process_time() - cpu
    figures["result_page_cold_ms"] = round(cold_ms, 1)
    figures["result_page_cold_cpu_s"] = round(cold_cpu, 2)
    print(
        f"result page, first request (analysis of every pair, then cached): {cold_ms:.0f} ms "
        f"(CPU {cold_cpu:.2f} s)"
    )
    for label, query in (
        ("first", ""),
        ("last", f"?page={last}"),
        ("condition", "?cond=2&show=failing"),
    ):
        ms, queries = get(run.pk, query)
        figures[f"result_page_{label}_ms"] = round(ms, 1)
        figures[f"result_page_{label}_queries"] = queries
        print(f"result page ({label}): {ms:.0f} ms, {queries} queries")
    small_cold = get(small_run.pk)[1]
    small_warm = get(small_run.pk)[1]
    figures["result_page_queries_30_pairs"] = [small_cold, small_warm]
    print(
        f"queries, first / later request: {cold_queries} / {figures['result_page_first_queries']} "
        f"({pair_set.pair_count:,} pairs) and {small_cold} / {small_warm} (30 pairs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="2,000 pairs, tiny model")
    parser.add_argument("--pairs-per-paradigm", type=int, default=None)
    parser.add_argument("--paradigms", type=int, default=67)
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--skip-database", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeat", type=int, default=2, help="engine rounds (best kept)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (engine)")
    parser.add_argument(
        "--suites-dir", type=Path, default=None, help="SyntaxGym suites for the engine part"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    from evaluations.minimal_pairs.analysis import AnalysisOptions, analyze_minimal_pairs
    from evaluations.minimal_pairs.tokens import parse_predictions_tsv, predictions_to_tsv
    from suites.formats.minimal_pairs import parse_minimal_pairs, to_tsv_text

    per = args.pairs_per_paradigm or (30 if args.smoke else 1000)
    paradigms = args.paradigms
    figures: dict[str, Any] = {"load_average_start": os.getloadavg()}
    text = generate_blimp(paradigms, per)
    pair_set = timed("parse_blimp_jsonl_s", figures, lambda: parse_minimal_pairs(text))
    figures["pairs"] = paradigms * per
    figures["sentences"] = len(pair_set.sentences)
    print(f"set: {figures['pairs']:,} pairs, {figures['sentences']:,} sentences")
    tsv = to_tsv_text(pair_set)
    timed("parse_nlpscholar_tsv_s", figures, lambda: parse_minimal_pairs(tsv, filename="x.tsv"))

    tokens = synthetic_tokens(pair_set)
    figures["tokens"] = len(tokens)
    print(f"token table: {len(tokens):,} tokens")
    predictions = timed("write_predictions_tsv_s", figures, lambda: predictions_to_tsv(tokens))
    timed("read_predictions_tsv_s", figures, lambda: parse_predictions_tsv(predictions))
    options = AnalysisOptions(conditions=("UID",))
    timed(
        "analysis_by_pair_by_cond_s",
        figures,
        lambda: analyze_minimal_pairs(tokens, pair_set, options, tables=("by_pair", "by_cond")),
    )
    timed(
        "analysis_by_pair_by_cond_next_sum_s",
        figures,
        lambda: analyze_minimal_pairs(
            tokens,
            pair_set,
            AnalysisOptions(punctuation="next", word_summary="sum", conditions=("UID", "field")),
            tables=("by_pair", "by_cond"),
        ),
    )
    timed(
        "analysis_by_word_s",
        figures,
        lambda: analyze_minimal_pairs(tokens, pair_set, options, tables=("by_word",)),
    )
    if not args.skip_database:
        database_figures(text, figures, tokens)
    if not args.skip_engine:
        engine_figures(args, pair_set, figures)
    figures["load_average_end"] = os.getloadavg()
    print(f"load average: {figures['load_average_start']} -> {figures['load_average_end']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
