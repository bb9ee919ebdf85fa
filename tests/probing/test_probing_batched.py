"""Logistic-regression probes fitted in a batch (issue 48): the probes of several layers,
of the task and a control task, and of three seeds, as one problem, give the accuracies
of fitting each alone (`fit_logreg`) within 0.5 points, on the SentEval samples."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from evaluations.probing import probes
from tests.probing.conftest import sample

SEEDS = (probes.SEED, 1, 2)


def hashed(sentence: str, layer: int, width: int = 96) -> np.ndarray:
    """A sentence's words counted into `width` buckets, hashed differently per layer: a
    stand-in for a model's layers that keeps the words (what the probes can read)."""
    vector = np.zeros(width, np.float32)
    for position, word in enumerate(sentence.lower().split()):
        key = f"{layer}|{word}|{position if layer % 2 else ''}".encode()
        vector[int(hashlib.md5(key).hexdigest(), 16) % width] += 1.0
    return vector


def task_data(task: str) -> tuple[list[probes.Layer], list[probes.Labels], int]:
    rows = [line.split("\t") for line in sample(task).read_text().splitlines()]
    labels = sorted({row[1] for row in rows})
    parts = {p: [r for r in rows if r[0] == p] for p in ("tr", "va", "te")}
    y = {p: np.array([labels.index(r[1]) for r in parts[p]]) for p in parts}
    # A control task as Hewitt and Liang's: a label drawn for each word type (here the
    # sentence's last word), the same wherever the type occurs.
    shuffled = {
        p: np.array(
            [
                int(hashlib.md5(r[2].split()[-1].encode()).hexdigest(), 16) % len(labels)
                for r in parts[p]
            ]
        )  # fmt: skip
        for p in parts
    }
    layers = [
        probes.Layer(*(np.stack([hashed(r[2], k) for r in parts[p]]) for p in ("tr", "va", "te")))
        for k in range(3)
    ]
    sets = [probes.Labels(y["tr"], y["va"], y["te"])]
    sets.append(probes.Labels(shuffled["tr"], shuffled["va"], shuffled["te"]))
    return layers, sets, len(labels)


@pytest.mark.parametrize("task", ["subj_number", "past_present", "obj_number"])
def test_batched_probes_equal_probes_fitted_alone(task) -> None:
    layers, sets, n_classes = task_data(task)
    batched = probes.fit_logreg_batched(layers, sets, n_classes, seeds=SEEDS)
    # One layer a batch (a budget below one layer's features) gives the same.
    narrow = probes.fit_logreg_batched(layers, sets, n_classes, seeds=SEEDS, batch_bytes=1)
    for k, layer in enumerate(layers):
        for s, labels in enumerate(sets):
            for i, seed in enumerate(SEEDS):
                split = probes.Split(
                    layer.x_tr, labels.y_tr, layer.x_va, labels.y_va,
                    layer.x_te, labels.y_te, n_classes,
                )  # fmt: skip
                alone = probes.fit_logreg(split, seed=seed)
                together = batched[k][s][i]
                assert abs(alone.te_accuracy - together.te_accuracy) <= 0.005, (k, s, seed)
                assert abs(alone.va_accuracy - together.va_accuracy) <= 0.005, (k, s, seed)
                assert together.hyperparameters["l2"] in probes.LOGREG_GRID
                assert len(together.te_predictions) == len(labels.y_te)
                assert abs(narrow[k][s][i].te_accuracy - alone.te_accuracy) <= 0.005, (k, s, i)


@pytest.mark.parametrize("task", ["subj_number", "past_present", "obj_number"])
@pytest.mark.parametrize("seed", [probes.SEED, 1])
def test_batched_online_codes_equal_block_by_block(task, seed) -> None:
    """The MDL probe's blocks of every layer in one batch give each block's bits as the
    blocks fitted one after another do (`online_codelength`), within 0.5%. A block whose
    training rows hold one class only has no optimum (its bias grows without end): its
    bits are where each solver stops, and are left out. So is a weak penalty on these
    samples' first blocks (a dozen rows, 96 dimensions): the loss is then flat to
    float32's precision over probes that read the next block differently
    (docs/probing.md, "The online code")."""
    layers, sets, n_classes = task_data(task)
    labels = sets[0]
    penalties = [0.01, 0.1, 0.03]
    batched = probes.online_codelength_batched(
        [layer.x_tr for layer in layers], labels.y_tr, n_classes, penalties, seed=seed
    )
    order = np.random.default_rng(seed).permutation(len(labels.y_tr))
    ends = probes.mdl_blocks(len(order))
    compared = 0
    for k, layer in enumerate(layers):
        split = probes.Split(
            layer.x_tr, labels.y_tr, layer.x_va, labels.y_va,
            layer.x_te, labels.y_te, n_classes,
        )  # fmt: skip
        alone = probes.online_codelength(split, hyperparameter=penalties[k], seed=seed)
        together = batched[k]
        assert (together["blocks"], together["uniform_bits"]) == (
            alone["blocks"],
            alone["uniform_bits"],
        )
        assert together["bits"] == pytest.approx(sum(together["block_bits"]))
        assert together["compression"] == pytest.approx(together["uniform_bits"] / together["bits"])
        assert together["block_bits"][0] == alone["block_bits"][0]  # the uniform code
        for b, start in enumerate(ends[:-1], start=1):
            if len(set(labels.y_tr[order[:start]])) < 2:
                continue
            compared += 1
            assert together["block_bits"][b] == pytest.approx(
                alone["block_bits"][b], rel=0.005, abs=0.01
            ), (k, b, start)
    assert compared >= 3 * len(layers)
