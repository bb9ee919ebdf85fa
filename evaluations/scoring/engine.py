"""score_sentences: regions in, token and region surprisals out."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from . import causal, masked, ngram
from .alignment import (
    STRADDLING_RULES,
    BuiltSentence,
    align_tokens,
    build_sentence,
    token_shares,
)
from .boundary import WORD_PROBABILITY, WordBoundary, corrected_sum, word_boundary
from .loading import LoadedModel
from .metrics import METRICS, region_metrics
from .schema import RegionScore, ScoringError, SentenceScore, TokenScore

# Tokens per forward pass (padding included). On CPU larger batches stop paying off
# early; on a GPU they keep the device busy.
CPU_TOKEN_BUDGET = 2048
GPU_TOKEN_BUDGET = 32768


# (sentence text, content token offsets) -> the word index of each content token.
WordIds = Callable[[str, list[tuple[int, int]]], list[int]]


def default_token_budget(model: LoadedModel) -> int:
    return GPU_TOKEN_BUDGET if model.device.startswith("cuda") else CPU_TOKEN_BUDGET


class EncodedText(NamedTuple):
    """One unique sentence as the model sees it."""

    ids: list[int]  # content tokens: no BOS, [CLS] or [SEP]
    offsets: list[tuple[int, int]]  # character span of each content token
    masked_view: masked.MaskedText | None  # masked LMs: the ids with special tokens


@dataclass
class UniqueTexts:
    """Input sentences reduced to distinct texts (suites repeat whole sentences)."""

    built: list[BuiltSentence]  # per input sentence
    text_of: list[int]  # per input sentence, the index of its text in `texts`
    texts: list[str]
    weight: list[int]  # per text, how many input sentences it stands for


class _Progress:
    """Turns "these texts are finished" into progress(done, total) in input sentences."""

    def __init__(
        self, progress: Callable[[int, int], None] | None, weight: list[int], total: int
    ) -> None:
        self.progress = progress
        self.weight = weight
        self.total = total
        self.done = 0
        if progress is not None:
            progress(0, total)

    def texts_done(self, finished: list[int]) -> None:
        self.done += sum(self.weight[index] for index in finished)
        if self.progress is not None and finished:
            self.progress(self.done, self.total)


def score_sentences(
    model: LoadedModel | ngram.NgramModel,
    sentences: Sequence[Sequence[str]],
    *,
    token_budget: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    prefix_sharing: bool = True,
    straddling: str = "missing",
    word_ids: WordIds | None = None,
    word_probability: str = "tokens",
    lead: str = "",
) -> list[SentenceScore]:
    """Token and region surprisals (bits) for sentences given as lists of region texts.

    Identical sentences are scored once. `progress(done, total)` is called after each
    batch with the number of input sentences finished. `prefix_sharing` (causal LMs)
    computes shared prefixes once; turning it off gives plain padded batches, which
    must agree within float32 noise. `straddling` is one of STRADDLING_RULES.
    `word_ids(text, offsets)` (masked LMs) gives the word of each content token for
    PLL-word-l2r instead of the tokenizer's own words, so that callers with
    model-independent words (minimal pairs) mask the same words for every model.
    `word_probability="corrected"` corrects each region's `sum` for the word boundary
    (boundary.py) where `applied_word_probability(model)` says the model allows it; the
    other metrics stay over token surprisals. `lead` (neural LMs): text the model reads
    before each sentence, after BOS, and scores with its first tokens: lm-evaluation-
    harness's " " (its target delimiter); offsets stay the sentence's, a token holding
    lead characters starts at 0.
    """
    budget = _check_arguments(model, sentences, token_budget, straddling)
    if word_probability not in WORD_PROBABILITY:
        raise ScoringError(
            f"word_probability must be one of {', '.join(WORD_PROBABILITY)}, "
            f"not '{word_probability}'"
        )
    if isinstance(model, ngram.NgramModel):
        # Words, not subword batches: the n-gram model scores each sentence in a loop.
        return _score_words(model, sentences, progress, straddling)
    unique = _unique_texts(sentences)
    tracker = _Progress(progress, unique.weight, len(sentences))
    encoded = _tokenize(model, [lead + text for text in unique.texts], word_ids)
    if lead:
        encoded = [_without_lead(item, len(lead)) for item in encoded]
    boundary = None
    if word_probability == "corrected" and applied_word_probability(model)[0] == "corrected":
        boundary = model_word_boundary(model)
    values, diagnostics, marks = _run_model(
        model, encoded, budget, prefix_sharing, tracker.texts_done, boundary
    )
    names = [model.tokenizer.convert_ids_to_tokens(list(item.ids)) for item in encoded]
    return [
        _assemble(
            list(regions),
            built,
            names[index],
            encoded[index].offsets,
            values[index],
            diagnostics[index],
            straddling,
            None if marks is None else marks[index],
        )
        for regions, built, index in zip(sentences, unique.built, unique.text_of, strict=True)
    ]


def model_word_boundary(model: LoadedModel | ngram.NgramModel) -> WordBoundary | None:
    """The tokenizer's word-start tokens, found once per loaded model; None for models
    whose tokens are words already (n-gram)."""
    if isinstance(model, ngram.NgramModel):
        return None
    if model.word_boundary is None:
        model.word_boundary = word_boundary(model.tokenizer)
    found: WordBoundary = model.word_boundary
    return found


def applied_word_probability(model: LoadedModel | ngram.NgramModel) -> tuple[str, str]:
    """What word_probability="corrected" gives for this model, and why:
    ("corrected", ...) for causal LMs whose tokenizer marks word starts, else ("tokens", why).
    """
    if isinstance(model, ngram.NgramModel):
        return "tokens", "an n-gram model's tokens are words: nothing to correct"
    if model.kind != "causal":
        return "tokens", "a masked LM's pseudo-log-likelihood has no word-boundary correction"
    boundary = model_word_boundary(model)
    assert boundary is not None
    return ("corrected" if boundary.applies else "tokens"), boundary.reason


def _check_arguments(
    model: LoadedModel | ngram.NgramModel,
    sentences: Sequence[Sequence[str]],
    token_budget: int | None,
    straddling: str,
) -> int:
    """The token budget to use; ScoringError for input the engine cannot take."""
    for regions in sentences:
        if isinstance(regions, str):
            raise ScoringError("each sentence must be a list of region texts, not a string")
    if straddling not in STRADDLING_RULES:
        raise ScoringError(
            f"straddling must be one of {', '.join(STRADDLING_RULES)}, not '{straddling}'"
        )
    if isinstance(model, ngram.NgramModel):
        return 0  # no batches
    budget = token_budget or default_token_budget(model)
    if budget < 1:
        raise ScoringError("token_budget must be positive")
    return budget


def _score_words(
    model: ngram.NgramModel,
    sentences: Sequence[Sequence[str]],
    progress: Callable[[int, int], None] | None,
    rule: str,
) -> list[SentenceScore]:
    """n-gram models: each word is a token with offsets, assembled like subword tokens."""
    built = [build_sentence(list(regions)) for regions in sentences]
    scored = ngram.score_texts(model, [sentence.text for sentence in built], progress=progress)
    return [
        _assemble(
            list(regions),
            sentence,
            [w.word.text for w in words],
            [(w.word.start, w.word.end) for w in words],
            np.array([w.surprisal for w in words], dtype=np.float64),
            {"oov_words": sum(1 for w in words if w.oov)},
            rule,
        )
        for regions, sentence, words in zip(sentences, built, scored, strict=True)
    ]


def _unique_texts(sentences: Sequence[Sequence[str]]) -> UniqueTexts:
    built = [build_sentence(list(regions)) for regions in sentences]
    index_of: dict[str, int] = {}
    text_of = [index_of.setdefault(sentence.text, len(index_of)) for sentence in built]
    weight = [0] * len(index_of)
    for index in text_of:
        weight[index] += 1
    return UniqueTexts(built, text_of, list(index_of), weight)


def _without_lead(item: EncodedText, shift: int) -> EncodedText:
    """Offsets into the sentence, not the lead + sentence the tokenizer read."""
    offsets = [(max(start - shift, 0), max(end - shift, 0)) for start, end in item.offsets]
    return item._replace(offsets=offsets)


def _run_model(
    model: LoadedModel,
    encoded: list[EncodedText],
    budget: int,
    prefix_sharing: bool,
    texts_done: Callable[[list[int]], None],
    boundary: WordBoundary | None = None,
) -> tuple[list[np.ndarray], list[dict[str, object]], list[np.ndarray] | None]:
    """Token surprisals (bits; NaN where missing) and diagnostics per unique text, and
    with `boundary` (causal LMs) log2 B before each token and after the last."""
    n_tokens = [len(item.ids) for item in encoded]
    if model.kind == "causal" and boundary is not None:
        return _run_causal_with_boundary(
            model, encoded, budget, prefix_sharing, texts_done, boundary
        )
    if model.kind == "causal":
        sequences, diagnostics = causal.plan_sequences(
            [item.ids for item in encoded], model.bos_token_id, model.context_length
        )
        values = causal.score_sequences(
            model,
            sequences,
            n_tokens,
            token_budget=budget,
            prefix_sharing=prefix_sharing,
            batch_done=texts_done,
        )
        return values, diagnostics, None
    views = [item.masked_view for item in encoded if item.masked_view is not None]
    # Loading refuses a masked model without a mask token.
    assert model.mask_token_id is not None
    rows, diagnostics = masked.plan_rows(views, model.mask_token_id, model.context_length)
    values = masked.score_rows(model, rows, n_tokens, token_budget=budget, batch_done=texts_done)
    return values, diagnostics, None


def _run_causal_with_boundary(
    model: LoadedModel,
    encoded: list[EncodedText],
    budget: int,
    prefix_sharing: bool,
    texts_done: Callable[[list[int]], None],
    boundary: WordBoundary,
) -> tuple[list[np.ndarray], list[dict[str, object]], list[np.ndarray]]:
    """Each text gets one extra target after its last token (its value is dropped), so
    that the last token is fed to the model and B after it is measured too.

    Texts longer than the context: the extra target can move the last window by one
    token, so the tokens in it may have one token less of left context than without.
    """
    content = [item.ids for item in encoded]
    # What the texts themselves need, for the diagnostics (no forward pass).
    _plain, diagnostics = causal.plan_sequences(content, model.bos_token_id, model.context_length)
    extended = [[*ids, model.pad_token_id] for ids in content]
    sequences, _ = causal.plan_sequences(extended, model.bos_token_id, model.context_length)
    values, marks = causal.score_sequences_with_boundary(
        model,
        sequences,
        [len(ids) for ids in extended],
        torch.tensor(boundary.ids, dtype=torch.long),
        token_budget=budget,
        prefix_sharing=prefix_sharing,
        batch_done=texts_done,
    )
    if not boundary.first_word_marked:
        # The first word carries no marker (GPT-2's "The"): at the start of the text
        # every token begins a word, so B = 1 there.
        for mark in marks:
            mark[0] = 0.0
    return [value[:-1] for value in values], diagnostics, marks


def _tokenize(
    model: LoadedModel, texts: list[str], word_ids: WordIds | None = None
) -> list[EncodedText]:
    """Content token ids and offsets per text (plus the masked-LM view with specials).

    Causal LMs: no special tokens from the tokenizer; BOS is added once by the engine.
    """
    if not texts:
        return []
    tokenizer = model.tokenizer
    if model.kind == "causal":
        encoding = tokenizer(
            texts,
            add_special_tokens=False,
            return_offsets_mapping=True,
            return_attention_mask=False,
        )
        return [
            EncodedText(list(ids), [tuple(pair) for pair in offsets], None)
            for ids, offsets in zip(encoding["input_ids"], encoding["offset_mapping"], strict=True)
        ]
    encoding = tokenizer(
        texts,
        add_special_tokens=True,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_attention_mask=False,
    )
    out: list[EncodedText] = []
    for index in range(len(texts)):
        ids = list(encoding["input_ids"][index])
        special = encoding["special_tokens_mask"][index]
        offsets = encoding["offset_mapping"][index]
        content = [p for p, flag in enumerate(special) if not flag]
        words: list[int | None] = list(encoding.word_ids(index))
        if word_ids is not None:
            words = [None] * len(ids)
            own = word_ids(texts[index], [tuple(offsets[p]) for p in content])
            for position, word in zip(content, own, strict=True):
                words[position] = word
        view = masked.MaskedText(ids, content, words)
        out.append(
            EncodedText([ids[p] for p in content], [tuple(offsets[p]) for p in content], view)
        )
    return out


def _assemble(
    regions: list[str],
    built: BuiltSentence,
    names: list[str],
    offsets: list[tuple[int, int]],
    values: np.ndarray,
    diagnostics: dict[str, object],
    rule: str,
    marks: np.ndarray | None = None,
) -> SentenceScore:
    """One input sentence's tokens, region values and diagnostics; with `marks` (log2 B
    before each token and after the last) each region's `sum` is word-corrected."""
    text, spans = built
    owners, straddling = align_tokens(text, spans, offsets)
    tokens = [
        TokenScore(
            text=name,
            start=int(start),
            end=int(end),
            region=owner,
            surprisal=None if math.isnan(value) else float(value),
        )
        for name, (start, end), owner, value in zip(names, offsets, owners, values, strict=True)
    ]
    shares = token_shares(text, spans, offsets) if rule == "split" else None
    by_region = _region_values(tokens, shares, len(regions))
    region_scores = [
        RegionScore(
            text=region.strip(),
            start=start,
            end=end,
            metrics=_metrics(by_region[index], empty=end == start),
        )
        for index, (region, (start, end)) in enumerate(zip(regions, spans, strict=True))
    ]
    log_boundary: list[float | None] | None = None
    if marks is not None:
        log_boundary = [None if math.isnan(m) else float(m) for m in marks]
        plain_marks = [float(m) for m in marks]  # JSON-ready floats, NaN where missing
        for index, (first, after) in _region_token_ranges(tokens, shares, len(regions)).items():
            metrics = region_scores[index].metrics
            metrics["sum"] = corrected_sum(metrics["sum"], plain_marks, first, after)
    return SentenceScore(
        text=text,
        tokens=tokens,
        regions=region_scores,
        diagnostics={
            "tokens": len(tokens),
            "straddling_tokens": straddling,
            "regions_without_tokens": sum(
                1
                for (start, end), got in zip(spans, by_region, strict=True)
                if end > start and not got
            ),
            "unassigned_tokens": sum(1 for token in tokens if token.region is None),
            **diagnostics,
        },
        log_boundary=log_boundary,
    )


def _region_token_ranges(
    tokens: list[TokenScore], shares: list[dict[int, int]] | None, n_regions: int
) -> dict[int, tuple[int, int]]:
    """Per region that receives tokens, (its first token, one past its last token)."""
    ranges: dict[int, tuple[int, int]] = {}
    for position, token in enumerate(tokens):
        share = shares[position] if shares is not None else {}
        owners: list[int | None] = list(share) if len(share) > 1 else [token.region]
        for region in owners:
            if region is None or region >= n_regions:
                continue
            first, _after = ranges.get(region, (position, position + 1))
            ranges[region] = (first, position + 1)
    return ranges


def _region_values(
    tokens: list[TokenScore], shares: list[dict[int, int]] | None, n_regions: int
) -> list[list[float | None]]:
    """Per region, the surprisals it receives: whole tokens by their first character, or
    with `shares` (the "split" rule) a straddling token's parts by characters."""
    by_region: list[list[float | None]] = [[] for _ in range(n_regions)]
    for position, token in enumerate(tokens):
        share = shares[position] if shares is not None else {}
        if len(share) > 1:
            characters = sum(share.values())
            for region, count in share.items():
                value = token.surprisal
                by_region[region].append(None if value is None else value * count / characters)
        elif token.region is not None:
            by_region[token.region].append(token.surprisal)
    return by_region


def _metrics(values: list[float | None], *, empty: bool) -> dict[str, float | None]:
    if not values and not empty:
        # A piece that began in an earlier region swallowed this one: nothing was
        # measured here, which must not read as an empty region's 0 bits.
        return dict.fromkeys(METRICS)
    return region_metrics(values)
