"""The frequency baseline, control tasks and selectivity, several seeds and the online
code (MDL), on SentEval's samples and on data built to know the answer."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from evaluations.probing.controls import (
    APPLICABLE,
    SENTENCE,
    WORD_TYPE,
    cmu_unigrams,
    control_labels,
    frequency_features,
    target_forms,
)
from evaluations.probing.probes import Split, mdl_blocks, online_codelength
from evaluations.probing.run import baselines, label_arrays, probe_task
from evaluations.scoring.loading import LoadedModel, load_model
from suites.formats.probing import (
    TASK_TYPES,
    ProbingInstance,
    ProbingReader,
    load_probing_file,
    read_probing,
)
from tests.probing.conftest import sample

SPHINX_UNIT = math.log10(1.0001)  # pocketsphinx's log base 1.0001, as log10


@pytest.fixture(scope="module")
def cmu():
    source = cmu_unigrams()
    if source is None:
        pytest.skip("pocketsphinx's CMU model is not installed")
    return source


@pytest.fixture(scope="module")
def gpt2(tiny_gpt2: Path) -> LoadedModel:  # noqa: F811
    model = load_model(str(tiny_gpt2), device="cpu")
    assert isinstance(model, LoadedModel)
    return model


def with_forms(task: str, forms: list[str]) -> list[ProbingInstance]:
    """The first lines of a sample with a target form put in as field #3, each read by
    the format's reader."""
    lines = sample(task).read_text(encoding="utf-8").splitlines()[: len(forms)]
    reader = ProbingReader(task)
    instances = []
    for number, (line, form) in enumerate(zip(lines, forms, strict=True), 1):
        partition, label, sentence = line.split("\t")
        item = reader.feed(number, f"{partition}\t{label}\t{form}\t{sentence}")
        assert item is not None, reader.errors
        instances.append(item)
    return instances


def test_frequency_features_are_the_cmu_unigrams_of_field_3(cmu) -> None:
    # The first six lines of subj_number, with their subject nouns read off by hand.
    forms = ["hunter", "Chills", "witnesses", "crows", "hues", "prickle"]
    instances = with_forms("subj_number", forms)
    assert [item.extra for item in instances][:2] == [("hunter",), ("Chills",)]
    assert instances[1].sentence.startswith("Chills ran along her skin")
    assert target_forms(instances) == forms
    values, fell_back = frequency_features(forms, cmu)
    # pocketsphinx's NGramModel.prob([word]) for each, read once by hand: an integer in
    # log base 1.0001 (hunter -108023, chills -131425, witnesses -115980).
    assert values[0] == pytest.approx(-108023 * SPHINX_UNIT, rel=1e-12)
    assert values[0] == pytest.approx(-4.6911447285356, abs=1e-12)
    assert values[1] == pytest.approx(-131425 * SPHINX_UNIT, rel=1e-12)  # lowercased
    assert values[2] == pytest.approx(-115980 * SPHINX_UNIT, rel=1e-12)
    # "prickle" is not in the CMU vocabulary: the fallback, the scorer's 32-bit OOV cost.
    assert fell_back == 1
    assert values[5] == pytest.approx(-32 * math.log10(2), rel=1e-12) == cmu.fallback


def test_frequency_baseline_learns_a_frequency_split(cmu, tmp_path: Path) -> None:
    frequent = ["time", "man", "way", "day", "thing"]  # log10 p above -3.3
    rare = ["zebras", "hues", "crows", "marmosets", "ocelots"]  # below -5.8 or unknown
    lines = []
    for partition in ("tr", "va", "te"):
        for i in range(5):
            lines.append(f"{partition}\tNN\t{frequent[i]}\tThe {frequent[i]} is here .")
            lines.append(f"{partition}\tNNS\t{rare[i]}\tThe {rare[i]} are here .")
    path = tmp_path / "subj_number.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    loaded = read_probing(path, task_type="subj_number")
    assert loaded.ok, loaded.errors
    base = baselines(loaded.instances, task_type="subj_number", frequency_source=cmu)
    frequency = base["frequency"]
    assert frequency["va_accuracy"] == 1.0 and frequency["te_accuracy"] == 1.0
    assert frequency["instances"] == 30 and frequency["forms"] == 10
    assert frequency["fell_back"] == 6  # marmosets and ocelots, in each partition
    # The length baseline cannot tell them apart: every sentence has five words.
    assert base["length"]["te_accuracy"] == 0.5


@pytest.mark.parametrize(
    ("task", "reason"),
    [
        ("subj_number", "the file has no target-form column (field #3)"),
        ("odd_man_out", "not for odd_man_out"),
        ("tree_depth", "not for tree_depth"),
    ],
)
def test_frequency_baseline_says_why_it_is_absent(task: str, reason: str) -> None:
    loaded = load_probing_file(sample(task))
    frequency = baselines(loaded.instances, task_type=task)["frequency"]
    assert frequency == {"va_accuracy": None, "te_accuracy": None, "reason": reason}


def test_every_task_type_has_a_row_of_the_table() -> None:
    assert set(APPLICABLE) == set(TASK_TYPES)
    with_frequency = sorted(name for name, row in APPLICABLE.items() if row["frequency"])
    assert with_frequency == ["obj_number", "past_present", "subj_number"]
    assert APPLICABLE["odd_man_out"]["control"] == SENTENCE
    assert APPLICABLE["word_content"]["control"] == WORD_TYPE


def test_sentence_control_permutes_labels_within_each_partition() -> None:
    instances = load_probing_file(sample("past_present")).instances
    labels, rows, y = label_arrays(instances)
    control = control_labels(instances, rows, y, len(labels), kind=SENTENCE)
    again = control_labels(instances, rows, y, len(labels), kind=SENTENCE)
    for name in ("tr", "va", "te"):
        assert Counter(control[name].tolist()) == Counter(y[name].tolist())
        assert np.array_equal(control[name], again[name])  # a fixed seed
        assert not np.array_equal(control[name], y[name])


def test_word_type_control_gives_each_form_one_label() -> None:
    loaded = load_probing_file(sample("subj_number"))
    instances = loaded.instances
    # Forms made up for the test: eight types, each shared by many sentences across
    # the partitions (the real files keep a form in one partition).
    forms = [f"form{i % 8}" if i % 3 else f"FORM{i % 8}" for i in range(len(instances))]
    labels, rows, y = label_arrays(instances)
    control = control_labels(instances, rows, y, len(labels), kind=WORD_TYPE, forms=forms)
    label_of: dict[str, int] = {}
    for name in ("tr", "va", "te"):
        for i, value in zip(rows[name].tolist(), control[name].tolist(), strict=True):
            assert label_of.setdefault(forms[i].lower(), value) == value  # case folded
    assert len(label_of) == 8 and set(label_of.values()) <= {0, 1}


def test_selectivity_is_task_minus_control_and_seeds_average(gpt2: LoadedModel) -> None:
    instances = load_probing_file(sample("past_present")).instances
    doc = probe_task(gpt2, instances, task={"type": "past_present"}, seeds=3)
    assert doc["seeds"] == [1234, 1235, 1236]
    assert doc["control"] == {"kind": SENTENCE, "seed": 4321}
    for layer in doc["layers"]:
        assert len(layer["seed_te"]) == 3
        assert layer["te_accuracy"] == pytest.approx(sum(layer["seed_te"]) / 3, abs=1e-15)
        assert layer["va_accuracy"] == pytest.approx(sum(layer["seed_va"]) / 3, abs=1e-15)
        assert layer["te_std"] == pytest.approx(float(np.std(layer["seed_te"], ddof=1)))
        assert layer["selectivity"] == layer["te_accuracy"] - layer["control"]["te_accuracy"]
        # 232 te sentences: every accuracy is a count over 232.
        for value in layer["seed_te"]:
            assert value * 232 == pytest.approx(round(value * 232))
    means = [layer["va_accuracy"] for layer in doc["layers"]]
    assert doc["best_layer"] == means.index(max(means))
    assert doc["best_selectivity"] == doc["layers"][doc["best_layer"]]["selectivity"]
    # Permuted labels carry nothing a probe could find: the control stays near chance.
    for layer in doc["layers"]:
        assert 0.35 <= layer["control"]["te_accuracy"] <= 0.65


def test_one_seed_and_no_control_is_the_single_probe(gpt2: LoadedModel) -> None:
    instances = load_probing_file(sample("subj_number")).instances
    one = probe_task(gpt2, instances, seeds=1, control=False)
    three = probe_task(gpt2, instances, seeds=3, control=False)
    assert one["control"] is None and "selectivity" not in one["layers"][0]
    for a, b in zip(one["layers"], three["layers"], strict=True):
        # The first seed is the same probe: alone or beside two others in a batch, it
        # stops where float32 rounding lets it, within the batched fit's 0.5 points.
        assert a["seed_te"][0] == pytest.approx(b["seed_te"][0], abs=0.005)
        assert a["seed_va"][0] == pytest.approx(b["seed_va"][0], abs=0.005)
        assert a["te_std"] == 0.0


def test_mdl_of_a_probe_that_learns_nothing_is_the_uniform_code() -> None:
    rng = np.random.default_rng(0)
    n = 1000
    y = rng.permutation(np.arange(n) % 2)
    # Constant vectors: the probe can learn only the label shares, which are even.
    flat = np.zeros((n, 6), dtype=np.float32)
    split = Split(flat, y, flat[:50], y[:50], flat[:50], y[:50], 2)
    code = online_codelength(split, hyperparameter=0.01)
    assert code["uniform_bits"] == 1000.0
    bits, uniform = code["bits"], code["uniform_bits"]
    assert bits is not None and uniform is not None
    assert bits / uniform == pytest.approx(1.0, abs=0.03)
    assert code["blocks"] == len(mdl_blocks(n)) == 11
    # The same labels written into the vectors: a few bits buy the rest.
    signal = flat.copy()
    signal[:, 0] = 2.0 * y - 1.0
    learnt = online_codelength(
        Split(signal, y, signal[:50], y[:50], signal[:50], y[:50], 2), hyperparameter=0.01
    )
    compression = learnt["compression"]
    assert compression is not None and compression > 5.0


def test_mdl_blocks_for_a_small_training_set() -> None:
    assert mdl_blocks(200) == [1, 2, 3, 6, 12, 25, 50, 100, 200]
    assert mdl_blocks(1) == [1]


def test_mdl_per_layer_when_asked(gpt2: LoadedModel) -> None:
    instances = load_probing_file(sample("obj_number")).instances
    doc = probe_task(gpt2, instances, seeds=1, control=False, mdl=True)
    assert doc["mdl"] is True
    n_tr = sum(1 for item in instances if item.partition == "tr")
    for layer in doc["layers"]:
        mdl = layer["mdl"]
        assert mdl["uniform_bits"] == n_tr  # two labels: one bit each
        assert mdl["compression"] == pytest.approx(mdl["uniform_bits"] / mdl["bits"])


def test_a_run_with_the_blocks_in_a_batch_gives_the_same_codes(
    gpt2: LoadedModel, monkeypatch
) -> None:
    """A run's online code with every block of every layer in one batch (what a GPU run
    does) against the blocks fitted one by one (a CPU run): the same document."""
    from evaluations.probing import run as probing_run

    instances = load_probing_file(sample("obj_number")).instances
    alone = probe_task(gpt2, instances, seeds=1, control=False, mdl=True)
    monkeypatch.setattr(probing_run, "batched_codelengths", lambda device: True)
    together = probe_task(gpt2, instances, seeds=1, control=False, mdl=True)
    assert [layer["te_accuracy"] for layer in together["layers"]] == [
        layer["te_accuracy"] for layer in alone["layers"]
    ]
    for a, b in zip(alone["layers"], together["layers"], strict=True):
        assert b["mdl"]["blocks"] == a["mdl"]["blocks"]
        assert b["mdl"]["uniform_bits"] == a["mdl"]["uniform_bits"]
        assert len(b["mdl"]["block_bits"]) == len(a["mdl"]["block_bits"])
        # Where both fits are defined (see test_probing_batched): within a few percent
        # in all, on 228 sentences whose first blocks hold a handful of rows.
        assert b["mdl"]["bits"] == pytest.approx(a["mdl"]["bits"], rel=0.05)
    assert together["diagnostics"]["seconds_mdl"] > 0
