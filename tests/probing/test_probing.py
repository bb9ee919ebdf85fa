"""Probing with tiny local models: pooled vectors, probes, baselines, proofs on real samples."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from evaluations.probing.extract import encode, extract_features, plan_batches
from evaluations.probing.probes import Split, fit_logreg, fit_mlp, length_baseline
from evaluations.probing.run import probe_task
from evaluations.scoring.loading import LoadedModel
from evaluations.scoring.schema import ScoringError
from suites.formats.probing import ProbingInstance, load_probing_file, read_probing
from tests.conftest import neural_model
from tests.probing.conftest import sample

# word_content's sample has va/te words never seen in its tr window: it is not a valid task.
VALID_SAMPLES = [
    "bigram_shift",
    "coordination_inversion",
    "obj_number",
    "odd_man_out",
    "past_present",
    "sentence_length",
    "subj_number",
    "top_constituents",
    "tree_depth",
]
SENTENCES = [
    "The author that the senator admired laughed .",
    'She said " no " .',
    "A dog slept .",
    "The author that the senator admired laughed .",  # a repeat: computed once
    "Every careful pilot followed the old river , who smiled .",
    "No .",
]


@pytest.fixture(scope="module")
def gpt2(tiny_gpt2: Path) -> LoadedModel:  # noqa: F811
    return neural_model(str(tiny_gpt2), device="cpu")


@pytest.fixture(scope="module")
def bert(tiny_bert: Path) -> LoadedModel:  # noqa: F811
    return neural_model(str(tiny_bert), device="cpu")


@pytest.fixture(scope="module")
def llama(tiny_llama: Path) -> LoadedModel:  # noqa: F811
    return neural_model(str(tiny_llama), device="cpu")


def by_hand(lm: LoadedModel, text: str, pooling: str = "mean") -> np.ndarray:
    """One sentence alone, no padding, states averaged over its own tokens by hand."""
    if lm.kind == "causal":
        content = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = [lm.bos_token_id, *content]
        first, last = 1, len(ids)
    else:
        ids = lm.tokenizer(text)["input_ids"]  # [CLS] ... [SEP]
        first, last = 1, len(ids) - 1
    with torch.inference_mode():
        states = lm.model.base_model(
            input_ids=torch.tensor([ids]), output_hidden_states=True
        ).hidden_states
    if pooling == "last":
        return np.stack([layer[0, last - 1].float().numpy() for layer in states])
    return np.stack([layer[0, first:last].float().mean(0).numpy() for layer in states])


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_batched_pooling_equals_one_at_a_time(name: str, request: pytest.FixtureRequest) -> None:
    lm: LoadedModel = request.getfixturevalue(name)
    batched = extract_features(lm, SENTENCES, token_budget=4096)
    single = extract_features(lm, SENTENCES, token_budget=1)  # one sentence per pass
    n_blocks = lm.model.config.num_hidden_layers
    assert batched.n_layers == n_blocks + 1  # the embedding output is layer 0
    assert batched.n_sentences == len(SENTENCES) and len(batched.stored[0]) == 5
    for k in range(batched.n_layers):
        assert np.allclose(batched.layer(k), single.layer(k), atol=1e-5, rtol=1e-5)
    for row, text in enumerate(SENTENCES):
        expected = by_hand(lm, text)
        got = np.stack([batched.layer(k)[row] for k in range(batched.n_layers)])
        assert np.allclose(got, expected, atol=1e-5, rtol=1e-5), text


def test_last_token_pooling_for_causal_models(gpt2: LoadedModel, bert: LoadedModel) -> None:
    features = extract_features(gpt2, SENTENCES, pooling="last", token_budget=4096)
    for row, text in enumerate(SENTENCES):
        expected = by_hand(gpt2, text, pooling="last")
        got = np.stack([features.layer(k)[row] for k in range(features.n_layers)])
        assert np.allclose(got, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ScoringError, match="needs a causal model"):
        extract_features(bert, SENTENCES, pooling="last")
    with pytest.raises(ScoringError, match="pooling must be one of"):
        extract_features(gpt2, SENTENCES, pooling="max")


def test_special_tokens_are_left_out(bert: LoadedModel, gpt2: LoadedModel) -> None:
    (item,), cut = encode(bert, ["a dog slept ."])
    assert cut == 0
    assert (
        item.ids[0] == bert.tokenizer.cls_token_id and item.ids[-1] == bert.tokenizer.sep_token_id
    )
    assert item.content == list(range(1, len(item.ids) - 1))
    (item,), _ = encode(gpt2, ["a dog slept ."])
    assert item.ids[0] == gpt2.bos_token_id and item.content[0] == 1
    # Too long for the 64-token context: cut, specials kept, counted.
    long_text = " ".join(["the old author"] * 40)
    (item,), cut = encode(bert, [long_text])
    assert cut == 1 and len(item.ids) == bert.context_length
    assert item.ids[-1] == bert.tokenizer.sep_token_id


def test_vectors_spill_to_disk_as_float16(gpt2: LoadedModel) -> None:
    in_memory = extract_features(gpt2, SENTENCES)
    seen: list[tuple[int, int]] = []
    with extract_features(
        gpt2, SENTENCES, memory_limit_bytes=0, progress=lambda d, t: seen.append((d, t))
    ) as on_disk:
        folder = on_disk.folder
        assert folder is not None and len(list(folder.glob("layer-*.npy"))) == on_disk.n_layers
        assert on_disk.stored[0].dtype == np.float16
        for k in range(on_disk.n_layers):
            assert on_disk.layer(k).dtype == np.float32
            assert np.allclose(on_disk.layer(k), in_memory.layer(k), rtol=2e-3, atol=2e-3)
        assert any("on disk as float16" in note for note in on_disk.notes)
    assert not folder.exists()
    # Progress counts input sentences, the repeat included.
    assert seen[0] == (0, 6) and seen[-1] == (6, 6)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_batches_are_length_sorted_within_budget() -> None:
    lengths = [3, 10, 5, 10, 2, 7]
    batches = plan_batches(lengths, 20)
    assert batches == [[1, 3], [5, 2], [0, 4]]
    assert sorted(i for batch in batches for i in batch) == list(range(6))
    assert plan_batches([50], 10) == [[0]]  # a sentence over budget still runs alone


def labels_by_hand(path: Path) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {"tr": Counter(), "va": Counter(), "te": Counter()}
    for line in path.read_text(encoding="utf-8").splitlines():
        partition, label = line.split("\t")[:2]
        counts[partition][label] += 1
    return counts


@pytest.mark.parametrize("task", VALID_SAMPLES)
def test_majority_baseline_is_the_share_counted_by_hand(task: str) -> None:
    from evaluations.probing.run import baselines

    path = sample(task)
    counts = labels_by_hand(path)
    top = max(counts["tr"].values())
    majority = min(
        (label for label, n in counts["tr"].items() if n == top),
        key=lambda label: (0, int(label), "") if label.isdigit() else (1, 0, label),
    )
    result = baselines(load_probing_file(path).instances)
    assert result["majority"]["label"] == majority
    for name in ("va", "te"):
        share = counts[name][majority] / sum(counts[name].values())
        assert result["majority"][f"{name}_accuracy"] == pytest.approx(share, abs=1e-12)
    assert result["chance"] == pytest.approx(1 / len(counts["tr"]))


def test_length_baseline_on_sentence_length_is_near_perfect() -> None:
    from evaluations.probing.run import baselines

    result = baselines(load_probing_file(sample("sentence_length")).instances)
    assert result["length"]["va_accuracy"] >= 0.9
    assert result["length"]["te_accuracy"] >= 0.9
    # On a task length says little about, it stays near the majority share.
    tense = baselines(load_probing_file(sample("past_present")).instances)
    assert tense["length"]["te_accuracy"] < 0.7


def test_length_baseline_borrows_the_nearest_seen_length() -> None:
    y = np.array([0, 1, 1])
    va, te = length_baseline([5, 9, 9], y, [6, 8], np.array([0, 1]), [7, 20], np.array([0, 1]))
    assert (va, te) == (1.0, 1.0)  # 7 is as near 5 as 9: the shorter length wins


def planted_task(seed: int, random_labels: bool) -> list[ProbingInstance]:
    """Label A or B written as one adjective token ('happy'/'tired') in a fixed template;
    with `random_labels` the label is drawn independently of the sentence."""
    rng = random.Random(seed)
    nouns = ["author", "senator", "pilot", "doctor", "farmer", "teacher", "student", "guard"]
    verbs = ["admired", "saw", "praised", "feared", "liked", "ignored", "visited", "helped"]
    out: list[ProbingInstance] = []
    sizes = {"tr": 240, "va": 120, "te": 120}
    line = 0
    for partition, size in sizes.items():
        for _ in range(size):
            line += 1
            label = rng.choice("AB")
            marker = "happy" if label == "A" else "tired"
            sentence = (
                f"the {marker} {rng.choice(nouns)} {rng.choice(verbs)} the {rng.choice(nouns)} ."
            )
            if random_labels:
                label = rng.choice("AB")
            out.append(ProbingInstance(line, partition, label, sentence))
    return out


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_a_planted_token_is_found_and_random_labels_are_not(
    name: str, request: pytest.FixtureRequest
) -> None:
    lm: LoadedModel = request.getfixturevalue(name)
    planted = probe_task(lm, planted_task(7, random_labels=False))
    assert max(layer["te_accuracy"] for layer in planted["layers"]) >= 0.97
    assert planted["best"]["te_accuracy"] >= 0.95
    noise = probe_task(lm, planted_task(7, random_labels=True))
    for layer in noise["layers"]:
        assert 0.3 <= layer["te_accuracy"] <= 0.7, layer


@pytest.mark.parametrize(("name", "task"), [("llama", "past_present"), ("bert", "tree_depth")])
def test_causal_and_masked_models_probe_a_real_sample(
    name: str, task: str, request: pytest.FixtureRequest
) -> None:
    lm: LoadedModel = request.getfixturevalue(name)
    loaded = load_probing_file(sample(task))
    stages: list[tuple[str, int, int]] = []
    doc = probe_task(
        lm, loaded.instances, task={"name": task}, progress=lambda *a: stages.append(a)
    )
    n_layers = lm.model.config.num_hidden_layers + 1
    assert [layer["layer"] for layer in doc["layers"]] == list(range(n_layers))
    assert doc["task"]["name"] == task and doc["task"]["labels"] == loaded.summary.labels
    for layer in doc["layers"]:
        assert 0.0 <= layer["va_accuracy"] <= 1.0 and 0.0 <= layer["te_accuracy"] <= 1.0
        assert layer["hyperparameters"]["l2"] in (1e-1, 1e-2, 1e-3, 1e-4)
    best = doc["best_layer"]
    assert doc["layers"][best]["va_accuracy"] == max(x["va_accuracy"] for x in doc["layers"])
    matrix = np.array(doc["confusion"]["matrix"])
    n_te = sum(loaded.summary.counts["te"].values())
    assert matrix.sum() == n_te
    # The matrix is the first seed's probe; te_accuracy is the mean over the seeds.
    assert np.trace(matrix) / n_te == pytest.approx(doc["best"]["seed_te"][0])
    assert matrix.sum(1).tolist() == [
        loaded.summary.counts["te"][label] for label in doc["confusion"]["labels"]
    ]
    assert stages[0] == ("vectors", 0, len(loaded.instances))
    assert stages[-1] == ("probes", n_layers, n_layers)


def strip_timing(doc: dict) -> dict:
    timing = {key: 0 for key in doc["diagnostics"] if key.startswith("seconds_")}
    return {**doc, "diagnostics": {**doc["diagnostics"], **timing}}


# The whole document with the logistic probe; the MLP's fits (seven times the CPU of
# the logistic ones) over two seeds, without the control task, whose labels are drawn
# the same way for either probe.
@pytest.mark.parametrize(
    ("probe", "options"),
    [("logreg", {}), ("mlp", {"seeds": 2, "control": False})],
    ids=["logreg", "mlp"],
)
def test_rerunning_gives_identical_numbers(gpt2: LoadedModel, probe: str, options: dict) -> None:
    instances = load_probing_file(sample("subj_number")).instances
    first = probe_task(gpt2, instances, probe=probe, pooling="last", **options)
    second = probe_task(gpt2, instances, probe=probe, pooling="last", **options)
    assert strip_timing(first) == strip_timing(second)
    if probe == "mlp":
        assert first["layers"][0]["hyperparameters"]["hidden"] == 50
        assert len(first["best"]["seed_te"]) == 2


def test_probes_separate_separable_data_and_prefer_strong_penalties_on_ties() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    split = Split(x[:200], y[:200], x[200:250], y[200:250], x[250:], y[250:], 2)
    logreg = fit_logreg(split)
    assert logreg.va_accuracy >= 0.96 and logreg.te_accuracy >= 0.9
    mlp = fit_mlp(split)
    assert mlp.va_accuracy >= 0.9 and mlp.te_accuracy >= 0.85
    # Constant labels: every l2 gets va accuracy 1, so the strongest one (first) is kept.
    flat = Split(x[:200], y[:200] * 0, x[200:250], y[200:250] * 0, x[250:], y[250:] * 0, 2)
    assert fit_logreg(flat).hyperparameters == {"l2": 0.1}


def test_unvalidated_instances_with_unseen_labels_are_refused(gpt2: LoadedModel) -> None:
    bad = read_probing("tr\tA\ta .\nva\tA\tb .\nte\tB\tc .\n", keep=None)
    assert not bad.ok
    instances = [
        ProbingInstance(1, "tr", "A", "a ."),
        ProbingInstance(2, "va", "A", "b ."),
        ProbingInstance(3, "te", "B", "c ."),
    ]
    with pytest.raises(ValueError, match="never in tr"):
        probe_task(gpt2, instances)
