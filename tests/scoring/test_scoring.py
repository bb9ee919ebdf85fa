"""The scoring engine against tiny local models (GPT-2/BPE, Llama/Metaspace, BERT/WordPiece).

Pure tests: no Django. Run with `pytest tests/scoring/test_scoring.py -p no:django`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from evaluations.scoring import (
    METRICS,
    LoadedModel,
    ModelLoadError,
    ScoringError,
    build_sentence,
    clear_model_cache,
    load_model,
    model_info,
    score_sentences,
)
from evaluations.scoring import causal as causal_module
from evaluations.scoring import checks as checks_module
from evaluations.scoring import engine as engine_module
from evaluations.scoring.alignment import align_tokens
from evaluations.scoring.loading import require_offsets
from evaluations.scoring.masked import word_l2r_masks
from evaluations.scoring.metrics import region_metrics
from evaluations.scoring.prefix import PrefixTrie
from tests.conftest import known, neural_model, word_l2r_by_hand
from tests.tiny_models import CONTEXT

LN2 = math.log(2.0)
TOL = 1e-4  # bits, float32

SENTENCES: list[list[str]] = [
    ["The author", "that the senators", "admired", "laughed", "."],
    ["The author", "that the senators", "", "laughed", "."],  # empty region
    ["  The author ", " that the pilot", "admired  ", "smiled", "!"],  # stray spaces
    ["The doctor's dog", ",", "which barked", ",", "didn't sleep", "?"],  # punctuation regions
    ["Antidisestablishmentarianism", "is", "unusually long"],  # multi-token word
    ["The café", "in Zürich", "served", "crème brûlée", "🙂"],  # unicode, split bytes
    ["東京 and 北京", "are cities", ";", "Москва", "is too", "."],
    ["The author", "that the senators", "admired", "laughed", "."],  # duplicate
    ["", "", ""],  # nothing at all
    ["Ωmega xylophones", "quizzically", "jump"],  # characters never seen in training
    ["The author that the senators admired", "laughed", "loudly", "."],
    ["The captain", "feared", "the storm", "."],
]

KINDS = ["gpt2", "llama", "bert"]


@pytest.fixture(params=KINDS)
def lm(request: pytest.FixtureRequest) -> LoadedModel:
    folder: Path = request.getfixturevalue(f"tiny_{request.param}")
    return neural_model(str(folder))


@pytest.fixture
def gpt2(tiny_gpt2: Path) -> LoadedModel:  # noqa: F811
    return neural_model(str(tiny_gpt2))


@pytest.fixture
def bert(tiny_bert: Path) -> LoadedModel:  # noqa: F811
    return neural_model(str(tiny_bert))


def values(results: list) -> list[list[float | None]]:
    return [[token.surprisal for token in result.tokens] for result in results]


def assert_close(
    a: Sequence[Sequence[float | None]], b: Sequence[Sequence[float | None]], tol: float = TOL
) -> None:
    assert len(a) == len(b)
    for row_a, row_b in zip(a, b, strict=True):
        assert len(row_a) == len(row_b)
        for x, y in zip(row_a, row_b, strict=True):
            assert (x is None) == (y is None)
            if x is not None and y is not None:
                assert abs(x - y) <= tol, (x, y)


_references: dict[str, torch.nn.Module] = {}


def reference(lm: LoadedModel) -> torch.nn.Module:
    """The same weights loaded plainly, apart from the engine (which swaps kernels)."""
    if lm.source not in _references:
        from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

        auto = AutoModelForCausalLM if lm.kind == "causal" else AutoModelForMaskedLM
        _references[lm.source] = auto.from_pretrained(lm.source).eval()
    return _references[lm.source]


def causal_by_hand(lm: LoadedModel, ids: list[int]) -> list[float]:
    """-log2 p(token | BOS, earlier tokens), with a full float64 log-softmax."""
    with torch.inference_mode():
        logits = reference(lm)(torch.tensor([[lm.bos_token_id, *ids]])).logits[0].double()
    logp = logits.log_softmax(-1)
    return [-float(logp[i, token]) / LN2 for i, token in enumerate(ids)]


# --- building sentences, alignment, metrics (no model) -------------------------------


def test_importing_the_package_does_not_import_torch() -> None:
    # Web processes read METRICS and build sentences through the package; the names
    # that need torch load on first use. A fresh interpreter, since this one has torch.
    code = (
        "import sys\n"
        "import evaluations.scoring as scoring\n"
        "from evaluations.scoring import METRICS, ScoringError, build_sentence\n"
        "assert build_sentence(['a ', 'b']).text == 'a b'\n"
        "import django\n"
        "django.setup()\n"
        "import evaluations.syntaxgym.outcomes, evaluations.syntaxgym.selectors, evaluations.syntaxgym.services\n"
        "from django.urls import get_resolver\n"
        "get_resolver().url_patterns  # every view module of the site\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'transformers' not in sys.modules, 'transformers was imported'\n"
        "assert callable(scoring.score_sentences) and 'torch' in sys.modules\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gym.settings"}
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_build_sentence_strips_drops_and_joins() -> None:
    text, spans = build_sentence([" The author ", "", "that  ", "laughed"])
    assert text == "The author that laughed"
    assert spans == [(0, 10), (10, 10), (11, 15), (16, 23)]
    assert build_sentence(["", " "]) == ("", [(0, 0), (0, 0)])


@given(st.lists(st.text(alphabet=" ab.é東", max_size=6), max_size=6))
def test_build_sentence_spans_hold_their_region(regions: list[str]) -> None:
    text, spans = build_sentence(regions)
    assert text == " ".join(r.strip() for r in regions if r.strip())
    assert len(spans) == len(regions)
    for region, (start, end) in zip(regions, spans, strict=True):
        assert text[start:end] == region.strip()
    ends = [end for _, end in spans]
    assert ends == sorted(ends)


def test_align_by_first_non_space_character() -> None:
    text, spans = build_sentence(["The dog", ",", "barked"])  # "The dog , barked"
    # GPT-2 style offsets that include the leading space, a lone space token, a
    # token that starts with a space before a comma.
    offsets = [(0, 3), (3, 7), (7, 8), (8, 9), (9, 16)]
    regions, straddling = align_tokens(text, spans, offsets)
    assert regions == [0, 0, 1, 1, 2]
    assert straddling == 0


def test_align_counts_straddling_tokens() -> None:
    text, spans = build_sentence(["The", "dog"])
    regions, straddling = align_tokens(text, spans, [(0, 7)])
    assert regions == [0]
    assert straddling == 1


def test_region_metrics() -> None:
    assert region_metrics([]) == {
        "sum": 0.0,
        "mean": None,
        "median": None,
        "range": None,
        "max": None,
        "min": None,
    }
    assert region_metrics([1.0, None]) == dict.fromkeys(METRICS)
    metrics = region_metrics([1.0, 4.0, 2.0])
    assert metrics == {
        "sum": 7.0,
        "mean": 7 / 3,
        "median": 2.0,
        "range": 3.0,
        "max": 4.0,
        "min": 1.0,
    }


def test_word_l2r_masks_the_token_and_later_pieces_of_its_word() -> None:
    # [CLS] the anti ##dis ##est . [SEP]
    word_ids = [None, 0, 1, 1, 1, 2, None]
    content = [1, 2, 3, 4, 5]
    assert word_l2r_masks(word_ids, content) == [[1], [2, 3, 4], [3, 4], [4], [5]]


def test_trie_packing_covers_every_node_with_its_ancestors() -> None:
    trie = PrefixTrie()
    paths = [[0, 1, 2, 3], [0, 1, 2, 4], [0, 1, 6], [0, 7, 8, 9], [0, 7, 8, 5], [12, 13]]
    for path in paths:
        trie.insert(path)
    assert len(trie) == 12
    rows = trie.pack(capacity=4)
    seen = set()
    for row in rows:
        assert len(row) <= 4
        for index, node in enumerate(row.nodes):
            parent = row.parents[index]
            assert parent < index
            assert (row.nodes[parent] if parent >= 0 else -1) == trie.parent[node]
            assert row.depths[index] == trie.depth[node]
        seen.update(row.nodes)
    assert seen == set(range(len(trie)))


# --- every model: batching, sharing, alignment -----------------------------------------


def test_batched_equals_one_at_a_time(lm: LoadedModel) -> None:
    batched = score_sentences(lm, SENTENCES, token_budget=48)
    single = [score_sentences(lm, [sentence])[0] for sentence in SENTENCES]
    assert_close(values(batched), values(single))
    assert [r.text for r in batched] == [r.text for r in single]


def test_prefix_sharing_equals_plain_batches(
    lm: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    if lm.kind == "causal":
        assert lm.tree_attention, model_info(lm)["notes"]
    plain = score_sentences(lm, SENTENCES, prefix_sharing=False)
    shared = score_sentences(lm, SENTENCES, prefix_sharing=True)
    assert_close(values(plain), values(shared))
    # Tiny rows force subtrees to be split, with their ancestor paths run again.
    monkeypatch.setattr(causal_module, "ROW_CAPACITY", 6)
    split = score_sentences(lm, SENTENCES, token_budget=24, prefix_sharing=True)
    assert_close(values(plain), values(split))


@pytest.mark.parametrize("breakage", ["positions", "mask"])
def test_a_model_that_ignores_tree_masks_loses_prefix_sharing(
    gpt2: LoadedModel, breakage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stand-ins for models that compute positions or attention their own way (ALiBi
    # from the 2D mask, say): the load-time probe must notice and turn sharing off.
    original = causal_module._tree_inputs

    def broken(lm, trie, rows):
        ids, positions, mask = original(lm, trie, rows)
        if breakage == "positions":
            positions = torch.arange(ids.shape[1]).expand_as(ids)
        else:
            width = ids.shape[1]
            causal = torch.ones(width, width, dtype=torch.bool).tril()
            mask = torch.zeros_like(mask).masked_fill(~causal, torch.finfo(mask.dtype).min)
        return ids, positions, mask

    monkeypatch.setattr(causal_module, "_tree_inputs", broken)
    ok, note = causal_module.check_tree_attention(gpt2)
    assert not ok and note is not None and "differs" in note


def test_model_is_context_sensitive(lm: LoadedModel) -> None:
    # Guards the equality tests: a model that ignored its context would pass them all.
    a, b = score_sentences(lm, [["The author", "laughed"], ["No pilot", "laughed"]])
    assert abs(known(a.regions[1].metrics["sum"]) - known(b.regions[1].metrics["sum"])) > 0.05


def test_regions_hold_their_tokens(lm: LoadedModel) -> None:
    for regions, result in zip(SENTENCES, score_sentences(lm, SENTENCES), strict=True):
        text, spans = build_sentence(regions)
        assert result.text == text
        assert result.diagnostics["straddling_tokens"] == 0
        assert result.diagnostics["unassigned_tokens"] == 0
        covered = set()
        for token in result.tokens:
            assert token.region is not None
            start, end = spans[token.region]
            inside = [p for p in range(token.start, token.end) if not text[p].isspace()]
            assert all(start <= p < end for p in inside), (token, regions)
            covered.update(inside)
            assert token.surprisal is not None and math.isfinite(token.surprisal)
        assert covered == {p for p, char in enumerate(text) if not char.isspace()}
        for index, region in enumerate(result.regions):
            mine = [known(t.surprisal) for t in result.tokens if t.region == index]
            assert (region.start, region.end) == spans[index]
            assert region.text == regions[index].strip()
            if not regions[index].strip():
                assert region.metrics["sum"] == 0.0 and region.metrics["mean"] is None
            else:
                assert mine, (index, regions)  # every non-empty region has a token
                assert region.metrics["sum"] == pytest.approx(math.fsum(mine), abs=1e-9)
                assert region.metrics["max"] == max(mine) and region.metrics["min"] == min(mine)


def test_results_are_plain_json(lm: LoadedModel) -> None:
    results = score_sentences(lm, SENTENCES[:3])
    decoded = json.loads(json.dumps([dataclasses.asdict(r) for r in results]))
    assert decoded[0]["regions"][0]["metrics"]["sum"] == results[0].regions[0].metrics["sum"]
    json.dumps(model_info(lm))


def test_progress_counts_input_sentences(lm: LoadedModel) -> None:
    calls: list[tuple[int, int]] = []
    score_sentences(lm, SENTENCES, token_budget=32, progress=lambda d, t: calls.append((d, t)))
    assert calls[0] == (0, len(SENTENCES))
    assert calls[-1] == (len(SENTENCES), len(SENTENCES))
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_identical_sentences_are_scored_once(
    lm: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    if lm.kind == "causal":
        original = causal_module.plan_sequences

        def spy(token_ids, *args, **kwargs):
            seen.append(len(token_ids))
            return original(token_ids, *args, **kwargs)

        monkeypatch.setattr(engine_module.causal, "plan_sequences", spy)
    else:
        original_rows = engine_module.masked.plan_rows

        def spy_rows(texts, *args, **kwargs):
            seen.append(len(texts))
            return original_rows(texts, *args, **kwargs)

        monkeypatch.setattr(engine_module.masked, "plan_rows", spy_rows)
    results = score_sentences(lm, [SENTENCES[0], SENTENCES[1], SENTENCES[0]])
    assert seen == [2]
    assert values(results)[0] == values(results)[2]


# --- causal models: BOS, by-hand values, sliding window --------------------------------


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_causal_values_match_a_hand_computation(kind: str, request: pytest.FixtureRequest) -> None:
    lm = neural_model(str(request.getfixturevalue(f"tiny_{kind}")))
    for regions in SENTENCES[:7]:
        result = score_sentences(lm, [regions])[0]
        ids = lm.tokenizer(result.text, add_special_tokens=False)["input_ids"]
        assert lm.bos_token_id not in ids  # BOS is added once, by the engine
        expected = causal_by_hand(lm, ids)
        assert_close([[t.surprisal for t in result.tokens]], [expected])
    # The first token by itself: -log2 p(token | BOS).
    first = score_sentences(lm, [["The", "author"]])[0].tokens[0]
    first_id = lm.tokenizer("The", add_special_tokens=False)["input_ids"][0]
    with torch.inference_mode():
        logits = reference(lm)(torch.tensor([[lm.bos_token_id]])).logits[0, -1].double()
    assert first.surprisal == pytest.approx(-float(logits.log_softmax(-1)[first_id]) / LN2, abs=TOL)
    assert known(first.surprisal) > 0


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("sharing", [True, False])
def test_sliding_window_beyond_the_context(
    kind: str, sharing: bool, request: pytest.FixtureRequest
) -> None:
    lm = neural_model(str(request.getfixturevalue(f"tiny_{kind}")))
    assert lm.context_length == CONTEXT
    words = "the old captain that every farmer admired , laughed".split()
    long_regions = [
        " ".join(words[i % len(words)] for i in range(j, j + 5)) for j in range(0, 150, 5)
    ]
    result = score_sentences(lm, [long_regions, SENTENCES[0]], prefix_sharing=sharing)[0]
    ids = lm.tokenizer(result.text, add_special_tokens=False)["input_ids"]
    full = [lm.bos_token_id, *ids]
    assert len(full) > 2 * CONTEXT

    # Windows by hand: the first holds the opening CONTEXT tokens; each later one ends
    # CONTEXT // 2 tokens further on and scores only those new tokens.
    expected: list[float] = []
    end = CONTEXT
    with torch.inference_mode():
        logp = reference(lm)(torch.tensor([full[:end]])).logits[0].double().log_softmax(-1)
        expected += [-float(logp[t - 1, full[t]]) / LN2 for t in range(1, end)]
        windows = 1
        while end < len(full):
            new_end = min(end + CONTEXT // 2, len(full))
            start = new_end - CONTEXT
            window = torch.tensor([full[start:new_end]])
            logp = reference(lm)(window).logits[0].double().log_softmax(-1)
            expected += [-float(logp[t - start - 1, full[t]]) / LN2 for t in range(end, new_end)]
            windows += 1
            end = new_end
    assert_close([[t.surprisal for t in result.tokens]], [expected])
    assert result.diagnostics["windows"] == windows > 2
    assert result.diagnostics["truncated"] is True
    assert sum(known(r.metrics["sum"]) for r in result.regions) == pytest.approx(
        sum(expected), abs=1e-3
    )


def test_model_without_bos_marks_first_token_missing(gpt2: LoadedModel) -> None:
    no_bos = dataclasses.replace(gpt2, bos_token_id=None, bos_token=None)
    result = score_sentences(no_bos, [["The author", "laughed"]])[0]
    assert result.tokens[0].surprisal is None
    assert result.diagnostics["no_bos_tokens"] == 1
    assert result.regions[0].metrics == dict.fromkeys(METRICS)
    assert result.regions[1].metrics["sum"] is not None
    # The second token is conditioned on the first alone.
    ids = gpt2.tokenizer(result.text, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logp = reference(gpt2)(torch.tensor([ids[:1]])).logits[0, -1].double().log_softmax(-1)
    assert result.tokens[1].surprisal == pytest.approx(-float(logp[ids[1]]) / LN2, abs=TOL)


def test_bfloat16_keeps_float32_log_probabilities(tiny_gpt2: Path) -> None:  # noqa: F811
    fp32 = load_model(str(tiny_gpt2))
    bf16 = neural_model(str(tiny_gpt2), dtype="bf16")
    assert bf16.dtype == "bfloat16" and bf16.tree_attention
    a = values(score_sentences(fp32, SENTENCES[:4]))
    b = values(score_sentences(bf16, SENTENCES[:4]))
    assert_close(a, b, tol=0.25)


# --- masked models: PLL-word-l2r --------------------------------------------------------


def test_pll_word_l2r_matches_a_hand_computation(bert: LoadedModel) -> None:
    regions = ["Antidisestablishmentarianism", "is", "unusually long", "."]
    result = score_sentences(bert, [regions])[0]
    encoding = bert.tokenizer(result.text)
    ids = encoding["input_ids"]
    word_ids = encoding.word_ids()
    assert word_ids[1] == word_ids[2]  # the long word is several pieces
    expected = word_l2r_by_hand(reference(bert), ids, word_ids, bert.mask_token_id)
    assert_close([[t.surprisal for t in result.tokens]], [expected])
    assert result.diagnostics["no_bos_tokens"] == 0


def test_masked_long_sentence_uses_windows(bert: LoadedModel) -> None:
    words = "the old captain that every farmer admired laughed".split()
    regions = [" ".join(words[i % len(words)] for i in range(j, j + 5)) for j in range(0, 80, 5)]
    long_result, short = score_sentences(bert, [regions, SENTENCES[0]], token_budget=256)
    assert long_result.diagnostics["truncated"] is True
    assert all(t.surprisal is not None for t in long_result.tokens)
    assert short.diagnostics["truncated"] is False
    # The middle token sits in a window centred on it.
    ids = bert.tokenizer(long_result.text, add_special_tokens=False)["input_ids"]
    width = bert.context_length - 2
    k = len(ids) // 2
    start = min(max(0, k - width // 2), len(ids) - width)
    window = [*ids[start : start + width]]
    window[k - start] = bert.mask_token_id
    cls, sep = bert.tokenizer.cls_token_id, bert.tokenizer.sep_token_id
    with torch.inference_mode():
        logits = (
            reference(bert)(torch.tensor([[cls, *window, sep]])).logits[0, 1 + k - start].double()
        )
    expected = -float(logits.log_softmax(-1)[ids[k]]) / LN2
    assert long_result.tokens[k].surprisal == pytest.approx(expected, abs=TOL)


# --- loading -----------------------------------------------------------------------------


def test_load_model_is_cached_and_detects_kind(tiny_gpt2: Path, tiny_bert: Path) -> None:  # noqa: F811
    assert load_model(str(tiny_gpt2)) is load_model(str(tiny_gpt2), device="cpu", dtype="fp32")
    info = model_info(load_model(str(tiny_bert)))
    assert info["kind"] == "masked" and info["context_length"] == CONTEXT
    gpt = model_info(load_model(str(tiny_gpt2)))
    assert gpt["kind"] == "causal" and gpt["bos_token"] == "<|endoftext|>"
    assert gpt["prefix_sharing"] is True and gpt["n_params"] > 0


def _check_cache_at(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """The load-time checks' answers kept in `folder` from now on, and no model kept
    loaded: the next load starts afresh."""
    monkeypatch.setenv("GYM_SCORING_CACHE", str(folder))
    clear_model_cache()


def test_load_time_checks_are_cached_per_model(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _check_cache_at(monkeypatch, tmp_path / "checks")
    first = neural_model(str(tiny_gpt2))
    assert "tree_check" in first.timings and "checks_cached" not in first.timings
    assert len(list((tmp_path / "checks").glob("*.json"))) == 1
    clear_model_cache()

    # A later process reads the answers instead of running the probes again.
    def probe_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("a load-time check ran again")

    monkeypatch.setattr(causal_module, "check_tree_attention", probe_again)
    monkeypatch.setattr(checks_module, "verify_split_head", probe_again)
    second = neural_model(str(tiny_gpt2))
    assert second is not first and "checks_cached" in second.timings
    assert second.tree_attention == first.tree_attention is True
    assert (second.head is None) == (first.head is None)
    assert second.notes == first.notes
    assert_close(
        values(score_sentences(second, SENTENCES)), values(score_sentences(first, SENTENCES))
    )

    # Another dtype is another answer: it is checked, not read.
    clear_model_cache()
    with pytest.raises(AssertionError, match="ran again"):
        load_model(str(tiny_gpt2), dtype="bf16")
    # Another model of the same architecture and config (a copy with other weights, as
    # every checkpoint of a training run is) reads the answers too.
    other = tmp_path / "other-weights"
    shutil.copytree(tiny_gpt2, other)
    state = load_file(str(other / "model.safetensors"))
    save_file({k: v + 0.01 for k, v in state.items()}, str(other / "model.safetensors"))
    clear_model_cache()
    assert "checks_cached" in neural_model(str(other)).timings
    # Another config is another architecture: it is checked, not read.
    config = json.loads((other / "config.json").read_text())
    config["layer_norm_epsilon"] = 1e-6
    (other / "config.json").write_text(json.dumps(config))
    clear_model_cache()
    with pytest.raises(AssertionError, match="ran again"):
        load_model(str(other))
    clear_model_cache()


def test_load_time_checks_run_on_one_block_and_leave_the_model_whole(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _check_cache_at(monkeypatch, tmp_path / "checks")
    seen: list[int] = []
    real_check = causal_module.check_tree_attention

    def blocks_of(lm: Any) -> Any:
        return lm.model.transformer.h

    def counting(lm: Any) -> tuple[bool, str | None]:
        seen.append(len(blocks_of(lm)))
        return real_check(lm)

    monkeypatch.setattr(causal_module, "check_tree_attention", counting)
    lm = neural_model(str(tiny_gpt2))
    blocks = blocks_of(lm)
    assert seen == [1] and len(blocks) == 2  # checked on one block, then put back
    assert lm.tree_attention and lm.head is not None
    before = values(score_sentences(lm, SENTENCES))

    # A block list that cannot be told from the config is checked whole.
    config = lm.model.config
    with checks_module._one_block(lm.model, config) as sliced:
        assert sliced and len(blocks_of(lm)) == 1
    assert blocks_of(lm) is blocks
    config.layer_types = ["sliding_attention", "full_attention"]
    try:
        with checks_module._one_block(lm.model, config) as sliced:
            assert not sliced and len(blocks_of(lm)) == 2
    finally:
        del config.layer_types
    assert_close(values(score_sentences(lm, SENTENCES)), before)

    # A check that fails on one block is run again on the whole model before it counts.
    _check_cache_at(monkeypatch, tmp_path / "checks-2")
    seen.clear()

    def fails_on_one_block(lm: Any) -> tuple[bool, str | None]:
        seen.append(len(blocks_of(lm)))
        if len(blocks_of(lm)) == 1:
            return False, "prefix sharing disabled: differs on one block"
        return real_check(lm)

    monkeypatch.setattr(causal_module, "check_tree_attention", fails_on_one_block)
    again = neural_model(str(tiny_gpt2))
    assert seen == [1, 2] and again.tree_attention
    assert not any("differs on one block" in note for note in again.notes)
    clear_model_cache()


def test_an_unusable_check_cache_only_means_checking_again(
    tiny_gpt2: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    _check_cache_at(monkeypatch, blocked)
    lm = neural_model(str(tiny_gpt2))
    assert lm.tree_attention and "tree_check" in lm.timings
    _check_cache_at(monkeypatch, tmp_path / "checks")
    load_model(str(tiny_gpt2))
    for entry in (tmp_path / "checks").glob("*.json"):
        entry.write_text("{not json")
    clear_model_cache()
    again = neural_model(str(tiny_gpt2))
    assert again.tree_attention and "tree_check" in again.timings
    clear_model_cache()


def test_missing_model_offline_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="was not found locally and the hub cannot be reached"):
        load_model("nobody-here/no-such-model-xyz")


def test_model_neither_causal_nor_masked(tiny_bert: Path, tmp_path: Path) -> None:  # noqa: F811
    config = json.loads((tiny_bert / "config.json").read_text())
    config["architectures"] = ["BertForSequenceClassification"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="neither a causal nor a masked"):
        load_model(str(tmp_path))


def test_tokenizer_without_offsets_is_refused() -> None:
    class SlowTokenizer:
        is_fast = False

    with pytest.raises(ModelLoadError, match="no character offsets"):
        require_offsets(SlowTokenizer(), "some/model")


def test_bad_input_is_refused(gpt2: LoadedModel) -> None:
    with pytest.raises(ScoringError):
        score_sentences(gpt2, ["a bare string"])
    with pytest.raises(ScoringError):
        load_model("whatever", dtype="int3")
