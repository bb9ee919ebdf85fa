"""Masked LM training (BERT's objective) on the CPU, with the causal trainer's machinery:
the masking (whole words, BERT's 80/10/10 split), a tiny BERT that learns and resumes to
the model it would have been, checkpoints scored by pseudo-log-likelihood as any masked
model is, a run on the site whose checkpoints give learning curves, the caps, and the
options refused where they do not apply."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from django.core.management import CommandError, call_command
from safetensors.torch import load_file

from evaluations.language_models.models import LanguageModel
from evaluations.models import Evaluation
from evaluations.runs import tasks
from evaluations.scoring import worker as scoring_worker
from evaluations.scoring.engine import score_sentences
from evaluations.scoring.loading import LoadedModel, load_model
from evaluations.syntaxgym import services as suite_runs
from evaluations.training import causal, masked, selectors, services
from evaluations.training import options as training_options
from evaluations.training.models import TrainingRun
from evaluations.training.worker import run_training
from suites.syntaxgym.services import suite_import
from tests.conftest import EXAMPLES, token_client
from tests.training.conftest import (
    PAGE_FORM,
    assert_refused,
    sample_sentences,
    sentences_file,
    train_causal,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# 8 steps of 4 blocks of 64 tokens, checkpoints after 1, 2, 4 and 8 steps.
OPTIONS = ("--preset", "tiny-bert", "--steps", "8", "--micro-batch", "4", "--checkpoints", "4")
SENTENCE = "The grandmothers reorganized their unbelievably enthusiastic choirs."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    return sentences_file(folder / "bookcorpus.txt", "tree_depth", "past_present")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return masked.train_tokenizer(sample_sentences("tree_depth"), 512)


def train(corpus: Path, out: Path, *extra: str) -> str:
    return train_causal(corpus, out, *OPTIONS, "--lr", "3e-3", *extra, kind="masked")


def info(out: Path) -> dict[str, Any]:
    return json.loads((out / causal.INFO_NAME).read_text())


def losses(out: Path) -> list[float]:
    return [e["loss"] for e in info(out)["log"] if "loss" in e]


# --- the masking ---------------------------------------------------------------------------


def masking(tokenizer: Any, probability: float, whole_word: bool) -> masked.Masking:
    options = training_options.MaskedOptions(
        shape=training_options.MASKED_PRESETS["tiny-bert"],
        steps=1,
        mask_probability=probability,
        whole_word_masking=whole_word,
    )
    return masked.Masking.of(options, tokenizer)


def test_whole_word_masking_masks_every_token_of_a_word_or_none(tokenizer) -> None:
    encoding = tokenizer([SENTENCE])
    words = encoding.word_ids(0)
    ids = encoding["input_ids"][0]
    # The sentence as the token file holds it: the same ids, a flag on each word's start.
    block = masked.line_tokens(tokenizer, [SENTENCE])[None, :]
    assert ((block & ~masked.WORD_START)[0] == ids).all()
    starts = [w is None or i == 0 or words[i - 1] != w for i, w in enumerate(words)]
    assert ((block & masked.WORD_START)[0] != 0).tolist() == starts
    pieces = {w: words.count(w) for w in words if w is not None}
    assert max(pieces.values()) >= 4  # "unbelievably" is several pieces of this vocabulary

    def chosen_words(labels: np.ndarray) -> dict[int, set[bool]]:
        seen: dict[int, set[bool]] = {}
        for position, word in enumerate(words):
            if word is None:  # [CLS] and [SEP] are never chosen
                assert labels[position] == masked.IGNORED
            else:
                seen.setdefault(word, set()).add(bool(labels[position] != masked.IGNORED))
        return seen

    whole, split = masking(tokenizer, 0.5, True), masking(tokenizer, 0.5, False)
    outcomes = [chosen_words(whole.arrays(block, (step, 0))[1][0]) for step in range(20)]
    # Every word is chosen with all its pieces or not at all, and each key chooses others.
    assert all(len(flags) == 1 for seen in outcomes for flags in seen.values())
    patterns = {tuple(sorted(w for w, flags in seen.items() if True in flags)) for seen in outcomes}
    assert len(patterns) > 10
    # Seeded: the same key gives the same masks.
    again = whole.arrays(block, (3, 0))
    assert all((a == b).all() for a, b in zip(again, whole.arrays(block, (3, 0)), strict=True))
    # Without it the pieces of a word are chosen one by one: some key splits a word.
    token_wise = [chosen_words(split.arrays(block, (step, 0))[1][0]) for step in range(20)]
    assert any(len(flags) == 2 for seen in token_wise for flags in seen.values())


def split_shares(inputs: np.ndarray, labels: np.ndarray, ids: np.ndarray, mask_id: int) -> tuple:
    chosen = labels != masked.IGNORED
    assert (labels[chosen] == ids[chosen]).all()
    assert (inputs[~chosen] == ids[~chosen]).all()  # what is not chosen stays as it is
    count = chosen.sum()
    as_mask = (inputs[chosen] == mask_id).sum() / count
    replaced = ((inputs[chosen] != mask_id) & (inputs[chosen] != ids[chosen])).sum() / count
    kept = (inputs[chosen] == ids[chosen]).sum() / count
    return as_mask, replaced, kept


def test_the_80_10_10_split_holds_on_a_large_batch() -> None:
    """BERT's split, on 512 blocks of 512 tokens (about 39,000 chosen tokens: the shares'
    standard errors are 0.2 points), one seeded draw."""
    special = np.arange(5)  # [PAD] [UNK] [CLS] [SEP] [MASK]
    mask_id = 4
    rule = masked.Masking(
        seed=7,
        probability=0.15,
        whole_word=False,
        mask_id=mask_id,
        special=special,
        replacements=np.arange(5, 1000),
    )
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 1000, size=(512, 512)).astype(np.uint32)
    ids[:, ::64] = 3  # a [SEP] every 64 tokens: never chosen
    starts = rng.random(ids.shape) < 0.4  # words of 2.5 tokens on average
    blocks = ids | np.where(starts, masked.WORD_START, np.uint32(0))
    inputs, labels = rule.arrays(blocks, (0, 0))
    ordinary = ids != 3
    assert (labels[~ordinary] == masked.IGNORED).all()
    assert (labels[ordinary] != masked.IGNORED).mean() == pytest.approx(0.15, abs=0.004)
    as_mask, replaced, kept = split_shares(inputs, labels, ids.astype(np.int64), mask_id)
    assert as_mask == pytest.approx(0.8, abs=0.01)
    assert replaced == pytest.approx(0.1, abs=0.008)
    assert kept == pytest.approx(0.1, abs=0.008)
    # A random token is an ordinary one, never a special token.
    assert not np.isin(inputs[(labels != masked.IGNORED) & (inputs != mask_id)], special).any()
    # With whole words the same share of tokens is chosen, split the same way.
    words = masked.Masking(7, 0.15, True, mask_id, special, np.arange(5, 1000))
    inputs, labels = words.arrays(blocks, (0, 0))
    assert (labels[ordinary] != masked.IGNORED).mean() == pytest.approx(0.15, abs=0.006)
    shares = split_shares(inputs, labels, ids.astype(np.int64), mask_id)
    assert shares == pytest.approx((0.8, 0.1, 0.1), abs=0.012)


# --- training ------------------------------------------------------------------------------


def test_a_masked_model_learns_and_resumes_to_the_same_model(corpus, tmp_path) -> None:
    straight = tmp_path / "straight"
    printed = train(corpus, straight)
    assert f"{straight}/checkpoint-256: step 1, 256 tokens" in printed
    summary = info(straight)
    assert summary["kind"] == "masked" and summary["steps_done"] == 8
    assert summary["options"]["mask_probability"] == 0.15
    assert summary["options"]["whole_word_masking"] is False
    assert summary["options"]["tokenizer"] == "bpe"
    config = json.loads((straight / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"]
    # The validation loss (the same masks at every checkpoint) falls from about ln(512).
    validation = [c["validation_loss"] for c in summary["checkpoints"]]
    assert validation == sorted(validation, reverse=True) and len(set(validation)) == 4
    assert validation[0] == pytest.approx(math.log(512), abs=0.2)
    assert losses(straight)[-1] < losses(straight)[0]
    assert summary["parameters"] == training_options.parameter_count(
        training_options.MASKED_PRESETS["tiny-bert"]
    )

    resumed = tmp_path / "resumed"
    assert "stopped early: 4 steps" in train(corpus, resumed, "--stop-after-step", "4")
    assert "8 steps (resumed at step 4)" in train(corpus, resumed)
    assert losses(resumed) == pytest.approx(losses(straight), abs=1e-6)
    first, second = (
        load_file(str(straight / "model.safetensors")),
        load_file(str(resumed / "model.safetensors")),
    )
    assert first.keys() == second.keys()
    for name, tensor in first.items():
        assert torch.allclose(second[name], tensor, atol=1e-6), name


def test_a_checkpoint_scores_as_a_masked_model(corpus, tmp_path) -> None:
    """WordPiece, whole words, and a vocabulary of 300 that trains in 320 rows: the
    checkpoint has the real rows only (its output bias too) and loads and scores by
    pseudo-log-likelihood through the scoring engine, as a hub masked model does."""
    out = tmp_path / "wordpiece"
    train(corpus, out, "--steps", "2", "--checkpoints", "2", "--vocab", "300",
          "--tokenizer", "wordpiece", "--whole-word-masking")  # fmt: skip
    assert info(out)["options"]["whole_word_masking"] is True
    checkpoint = out / "checkpoint-256"
    weights = load_file(str(checkpoint / "model.safetensors"))
    assert weights["bert.embeddings.word_embeddings.weight"].shape == (300, 64)
    assert weights["cls.predictions.bias"].shape == (300,)
    model = load_model(str(checkpoint), device="cpu")
    assert isinstance(model, LoadedModel)
    assert model.kind == "masked" and model.vocab_size == 300
    assert model.mask_token_id == model.tokenizer.convert_tokens_to_ids("[MASK]")
    scores = score_sentences(model, [["The keys to the cabinet", " are", " on the table ."]])
    surprisals = [token.surprisal for token in scores[0].tokens]
    assert len(surprisals) >= 8
    assert all(s is not None and math.isfinite(s) and s > 0 for s in surprisals)
    assert all(math.isfinite(region.metrics["sum"] or math.nan) for region in scores[0].regions)
    results = tmp_path / "scores.json"
    call_command(
        "score", "--model", str(out), "--suite", str(EXAMPLES / "agreement_local.json"),
        "--out", str(results), stderr=io.StringIO(),
    )  # fmt: skip
    assert 0.0 <= json.loads(results.read_text())["results"]["accuracy"] <= 1.0
    # Another masked run with this model's tokenizer, as it is.
    borrowed = tmp_path / "borrowed"
    train(corpus, borrowed, "--steps", "1", "--checkpoints", "1", "--tokenizer-from", str(out))
    assert (borrowed / "tokenizer.json").read_text() == (out / "tokenizer.json").read_text()


@pytest.mark.django_db
def test_a_masked_run_takes_a_tokenizer_with_a_mask_token(
    book_corpus, alice, tiny_bert, tiny_gpt2
) -> None:
    from evaluations.language_models import registry as model_registry

    bert = model_registry.model_register(source=str(tiny_bert), name="tiny-bert-model")
    model_registry.model_register(source=str(tiny_gpt2), name="tiny-gpt2")
    response = ask(alice)("with-bert", {"tokenizer_model": "tiny-bert-model"})
    assert response.status_code == 201, response.content
    options = response.json()["options"]
    assert (options["tokenizer"], options["tokenizer_model"]) == ("model", bert.name)
    assert options["shape"]["vocab"] == len(
        training_options.model_tokenizer(str(tiny_bert), "masked")
    )
    message = (
        f"the tokenizer of {str(tiny_gpt2)!r} has no mask token, which a masked model predicts"
    )
    assert_refused(
        ask(alice), "with-gpt2", [({"tokenizer_model": "tiny-gpt2"}, "tokenizer_model", message)]
    )


@pytest.mark.django_db
def test_a_masked_run_on_the_site_gives_learning_curves(book_corpus, alice, anon_client) -> None:
    suite = suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite
    run = services.training_request(
        corpus=book_corpus,
        name="Book BERT",
        kind="masked",
        options={
            "preset": "tiny-bert",
            "steps": 4,
            "checkpoints": 2,
            "micro_batch": 4,
            "mask_probability": 0.2,
            "whole_word_masking": True,
        },
        suites=[suite],
        user=alice,
    )
    assert run.model.kind == "masked" and run.training_kind == "masked"
    assert run.options["shape"]["arch"] == "bert" and run.options["tokenizer"] == "bpe"
    assert (run.options["mask_probability"], run.options["whole_word_masking"]) == (0.2, True)
    results = run_training(
        json.loads(json.dumps(services.training_payload(run))), progress=lambda done, total: None
    )
    assert results["kind"] == "masked"
    assert [(c["step"], c["tokens"]) for c in results["checkpoints"]] == [(1, 256), (4, 1024)]
    for point in results["checkpoints"]:
        services.training_checkpoint_store(run_id=run.pk, attempt=1, point=point, entries=[])
    assert services.training_results_store(run_id=run.pk, attempt=1, results=results)
    run.refresh_from_db()
    assert run.status == "done"
    # The last step's checkpoint is the finished model (the same weights).
    names = ["book-bert-256", "book-bert"]
    assert [c["model"] for c in run.checkpoints] == names
    assert set(LanguageModel.objects.filter(name__in=names).values_list("kind", flat=True)) == {
        "masked"
    }
    # Each checkpoint's suite run, asked for as for a causal run, scored by the worker's
    # code (pseudo-log-likelihood: the model is masked) and stored.
    asked = Evaluation.objects.filter(suite=suite).order_by("model__name")
    assert [e.model.name for e in asked] == ["book-bert", "book-bert-256"]
    for evaluation in asked:
        scored = scoring_worker.run_scoring(suite_runs.scoring_payload(evaluation))
        packed = {"inline": scored}
        assert tasks.store.apply(args=["suite", evaluation.pk, 1, packed]).get() is True
    (row,) = selectors.learning_curves(run)["suites"]
    assert [(p["tokens"], p["status"]) for p in row["points"]] == [(256, "done"), (1024, "done")]
    assert all(0.0 <= p["accuracy"] <= 1.0 for p in row["points"])
    page = anon_client.get(f"/training/{run.pk}/").content.decode()
    assert "masked transformer from scratch (BERT-style)" in page
    assert "each word (whole-word masking: all its tokens) chosen with probability 0.2" in page


# --- the caps and the options --------------------------------------------------------------


class _Tokenizer:
    """What build_model reads of a tokenizer for a BERT: its size and padding token."""

    pad_token_id = 0

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_the_parameter_count_of_a_bert_is_the_built_models() -> None:
    shapes = [
        *training_options.MASKED_PRESETS.values(),
        training_options.ModelShape("bert", layers=3, width=96, heads=4, context=100, vocab=1000),
    ]
    for shape in shapes:
        with torch.device("meta"):
            model = causal.build_model(shape, _Tokenizer(shape.vocab))
        # The padding rows of the embedding (the output weight is tied to it) and bias.
        padding = (training_options.padded_vocab(shape.vocab) - shape.vocab) * (shape.width + 1)
        built = sum(p.numel() for p in model.parameters()) - padding
        assert training_options.parameter_count(shape) == built, shape
    # BERT-base's masked-LM model, as transformers counts bert-base-uncased's.
    small = training_options.MASKED_PRESETS["small-bert"]
    assert training_options.parameter_count(small) == 109_514_298


@pytest.mark.django_db
def test_every_masked_preset_passes_on_the_defaults_and_the_caps_hold() -> None:
    for preset in [*training_options.MASKED_PRESETS, "custom"]:
        stored, errors, _named = services.training_options("masked", {"preset": preset})
        assert errors == {}, preset
        assert (stored["mask_probability"], stored["whole_word_masking"]) == (0.15, False)
    too_big = {"preset": "custom", "layers": 48, "width": 4096, "heads": 32, "micro_batch": 1}
    message = services.training_options("masked", too_big)[1]["options"]
    assert message.startswith("the model would have 9,8")
    assert "(GYM_TRAINING_MAX_PARAMETERS)" in message


def ask(alice: Any, kind: str = "masked") -> Any:
    def post(name: str, options: dict[str, Any]) -> Any:
        body = {"corpus": "book", "name": name, "kind": kind, "options": options}
        return token_client(alice).post(
            "/api/training-runs/", json.dumps(body), content_type="application/json"
        )

    return post


@pytest.mark.django_db
def test_bad_masked_options_are_refused_and_change_nothing(book_corpus, alice) -> None:
    probability = "mask_probability must be above 0 and below 1 (BERT's is 0.15); got"
    assert_refused(
        ask(alice),
        "m",
        [
            ({"mask_probability": 0}, "mask_probability", f"{probability} 0"),
            ({"mask_probability": 1}, "mask_probability", f"{probability} 1"),
            ({"mask_probability": "nan"}, "mask_probability", f"{probability} nan"),
            (
                {"mask_probability": "x"},
                "mask_probability",
                "mask_probability must be a number, not 'x'",
            ),
            (
                {"whole_word_masking": "yes"},
                "whole_word_masking",
                "whole_word_masking must be true or false, not 'yes'",
            ),
            (
                {"preset": "tiny"},
                "preset",
                "the preset 'tiny' is not a masked model; choose one of tiny-bert, "
                "small-bert, custom",
            ),
            (
                {"tokenizer": "unigram"},
                "tokenizer",
                "tokenizer must be one of bpe, wordpiece, model, not 'unigram'",
            ),
            (
                {"arch": "gpt2"},
                "options",
                "architecture 'gpt2' is not one of a masked model's: bert",
            ),
            (
                {"base_model": "anything"},
                "base_model",
                "base_model is an option of causal runs: continued pre-training trains a "
                "causal model, and a masked run starts afresh",
            ),
        ],
    )
    other_kinds = "is an option of masked runs, not of"
    assert_refused(
        ask(alice, "causal"),
        "c",
        [
            ({"mask_probability": 0.2}, "mask_probability", f"mask_probability {other_kinds} causal runs"),
            (
                {"preset": "tiny-bert"},
                "preset",
                "the preset 'tiny-bert' is not a causal model; choose one of tiny, "
                "tiny-llama, small, small-llama, custom",
            ),
        ],
    )  # fmt: skip
    assert_refused(
        ask(alice, "ngram"),
        "n",
        [({"whole_word_masking": False}, "whole_word_masking", f"whole_word_masking {other_kinds} ngram runs")],
    )  # fmt: skip
    assert not TrainingRun.objects.exists() and not LanguageModel.objects.exists()


@pytest.mark.django_db
def test_the_page_asks_for_a_masked_run(book_corpus, alice_client) -> None:
    form = {**PAGE_FORM, "kind": "masked", "preset": "tiny-bert"}
    page = alice_client.post_form("/training/new/", {**form, "mask_probability": 1.5})
    assert page.status_code == 400
    assert "mask_probability must be above 0 and below 1 (BERT&#x27;s is 0.15); got 1.5" in (
        page.content.decode()
    )
    assert not TrainingRun.objects.exists()
    page = alice_client.post_form(
        "/training/new/", {**form, "mask_probability": 0.25, "whole_word_masking": "on"}
    )
    run = TrainingRun.objects.get()
    assert page.status_code == 302 and run.training_kind == "masked"
    assert (run.options["mask_probability"], run.options["whole_word_masking"]) == (0.25, True)


def test_the_command_refuses_what_does_not_apply(corpus, tmp_path) -> None:
    out = tmp_path / "x"
    refusals = [
        (("--kind", "causal", "--mask-probability", "0.2"),
         "--mask-probability is an option of --kind masked, not of causal"),
        (("--kind", "ngram", "--whole-word-masking"),
         "--whole-word-masking is an option of --kind masked, not of ngram"),
        (("--kind", "masked", "--from-model", str(tmp_path)),
         "--from-model is an option of --kind causal"),
        (("--kind", "masked", "--preset", "tiny"), "the preset 'tiny' is not a masked model"),
        (("--kind", "masked", "--mask-probability", "1"),
         r"the mask probability must be above 0 and below 1; got 1.0"),
    ]  # fmt: skip
    for flags, message in refusals:
        with pytest.raises(CommandError, match=message):
            call_command("train", "--corpus", str(corpus), "--out", str(out), *flags)
    assert not out.exists()


@pytest.mark.slow
def test_two_processes_mask_and_train_as_one(corpus, tmp_path) -> None:
    """The masks depend on the seed, the step and the micro-batch's place in the step,
    not on the process that runs it: two processes (gloo on the CPU) train the model one
    process trains."""
    steps = ("--steps", "4", "--micro-batch", "2", "--batch-tokens", "512", "--checkpoints", "2")
    one, two = tmp_path / "one", tmp_path / "two"
    train(corpus, one, *steps, "--whole-word-masking")
    train(corpus, two, *steps, "--whole-word-masking", "--devices", "2")
    assert info(two)["options"]["devices"] == 2
    assert losses(two) == pytest.approx(losses(one), rel=1e-4)
    first, second = (
        load_file(str(one / "model.safetensors")),
        load_file(str(two / "model.safetensors")),
    )
    for name, tensor in first.items():
        assert torch.allclose(second[name], tensor, atol=1e-5), name
